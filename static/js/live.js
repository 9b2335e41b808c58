// One WebSocket to /ws/, shared by a page's live parts. Reconnects with back-off and
// re-subscribes. Events sent while the socket was down are lost, so each part repaints from
// the API when told: {kind: "subscribed"} after every (re)subscription, and {kind: "resync"}
// when the tab comes back into view or the network comes back (timers of a hidden tab are
// throttled, so a page can sit on a stale picture without its socket ever closing).
(function () {
  "use strict";
  const handlers = new Map();
  let socket = null;
  let delay = 500;
  let retry = null;

  function tell(group, event) {
    for (const fn of handlers.get(group) || []) {
      try { fn(event); } catch (e) { console.error(e); }
    }
  }

  function connect() {
    if (retry) { clearTimeout(retry); retry = null; }
    if (socket && (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING)) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/ws/`);
    socket = ws;
    ws.addEventListener("open", () => {
      delay = 500;
      for (const group of handlers.keys()) ws.send(JSON.stringify({ action: "subscribe", group }));
    });
    ws.addEventListener("message", (message) => {
      let data;
      try { data = JSON.parse(message.data); } catch (e) { return; }
      if (data.type === "event") tell(data.group, data.event);
      else if (data.type === "subscribed") tell(data.group, { kind: "subscribed" });
    });
    ws.addEventListener("close", () => {
      if (socket !== ws) return;
      socket = null;
      retry = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
  }

  function wake() {
    // Back in view or back online: reconnect now rather than at the end of a long back-off,
    // and have every part check what it shows against the server.
    delay = 500;
    if (!socket) connect();
    else if (socket.readyState === WebSocket.OPEN) for (const group of handlers.keys()) tell(group, { kind: "resync" });
  }
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") wake(); });
  window.addEventListener("online", wake);
  window.addEventListener("pageshow", (event) => { if (event.persisted) wake(); });

  window.CrucibleLive = {
    subscribe(group, fn) {
      if (!handlers.has(group)) handlers.set(group, []);
      handlers.get(group).push(fn);
      if (socket && socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({ action: "subscribe", group }));
      }
      if (!socket && !retry) connect();
    },
  };
})();
