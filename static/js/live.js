// One WebSocket to /ws/, shared by a page's live parts. Reconnects with back-off and
// re-subscribes; callers refetch state on reconnect, so nothing missed stays missing.
(function () {
  "use strict";
  const handlers = new Map();
  let socket = null;
  let delay = 500;

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/`);
    socket.addEventListener("open", () => {
      delay = 500;
      for (const group of handlers.keys()) socket.send(JSON.stringify({ action: "subscribe", group }));
    });
    socket.addEventListener("message", (message) => {
      let data;
      try { data = JSON.parse(message.data); } catch (e) { return; }
      if (data.type === "event" && handlers.has(data.group)) {
        for (const fn of handlers.get(data.group)) fn(data.event);
      } else if (data.type === "subscribed" && handlers.has(data.group)) {
        for (const fn of handlers.get(data.group)) fn({ kind: "subscribed" });
      }
    });
    socket.addEventListener("close", () => {
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
  }

  window.CrucibleLive = {
    subscribe(group, fn) {
      if (!handlers.has(group)) handlers.set(group, []);
      handlers.get(group).push(fn);
      if (socket && socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({ action: "subscribe", group }));
      }
      if (!socket) connect();
    },
  };
})();
