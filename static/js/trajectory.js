// A running trajectory's steps arrive live. The page was rendered with the steps that
// existed then; after subscribing it asks the API for anything newer, and from then on
// events add steps. A step number already shown is never added twice. Steps belong to an
// attempt: when a worker takes the rollout over (the last one stopped beating), its steps
// replace what is shown, and a late event of the older attempt is dropped.
//
// A long trajectory is shown a chunk at a time: the server renders the first screenful, and an
// item at either end of the list (li.steps-more) says where the next chunk starts. The later one
// loads as it nears the viewport, the earlier one when clicked (loading above the reader would
// move what they are reading). Chunks are rendered by the server with the page's own template,
// so agent text loaded on demand is escaped exactly as the first screenful is. Live steps are
// added only once the list reaches the trajectory's end; until then the later item fetches them.
// A list filtered by the page's form (tool, errors, flag, text) gets its chunks with the same
// query, and no live steps: whether a new step matches is the server's to say.
(function () {
  "use strict";
  const list = document.getElementById("steps");
  if (!list || !window.CrucibleLive) return;
  const status = document.getElementById("trajectory-status");
  let attempt = Number(list.dataset.attempt || 0);
  let generation = 0;  // bumped when the shown steps are dropped: a chunk asked for before is stale

  function lastShown() {
    const items = list.querySelectorAll("li.step");
    return items.length ? Number(items[items.length - 1].id.slice(5)) : 0;
  }
  function laterItem() {
    return list.querySelector("li.steps-more[data-after]");
  }

  // True when the event's attempt is the one shown (after starting over for a newer one).
  function current(eventAttempt) {
    if (eventAttempt === undefined || eventAttempt === null) return true;
    if (eventAttempt < attempt) return false;
    if (eventAttempt > attempt) {
      attempt = eventAttempt;
      generation += 1;
      list.querySelectorAll("li.step, li.steps-more").forEach((li) => li.remove());
    }
    return true;
  }

  const observer = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
      for (const entry of entries) if (entry.isIntersecting) loadChunk(entry.target);
    }, { rootMargin: "0px 0px 1500px 0px" })  // ahead of the reader, so scrolling seldom waits
    : null;
  function watch(item) {
    if (observer && item.dataset.after !== undefined) observer.observe(item);
  }
  const loading = new Set();
  async function loadChunk(item) {
    if (loading.has(item) || !item.isConnected) return;
    loading.add(item);
    const asked = generation;
    // data-chunks carries the page's step filters (?tool=, ?q=, ...); the chunk keeps them.
    const url = new URL(list.dataset.chunks, location.href);
    if (item.dataset.after !== undefined) url.searchParams.set("after", item.dataset.after);
    else url.searchParams.set("before", item.dataset.before);
    let chunk = null;
    try {
      const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (response.ok) chunk = new DOMParser().parseFromString(await response.text(), "text/html").querySelector("ol.steps");
    } catch (e) {
      // offline: the item stays, and loads when it comes into view or is clicked again
    }
    loading.delete(item);
    if (!chunk || asked !== generation || !item.isConnected) return;
    const chunkAttempt = Number(chunk.dataset.attempt);
    if (chunkAttempt !== attempt) {
      if (current(chunkAttempt)) catchUp();  // a newer attempt: its steps replace these
      return;
    }
    if (observer) observer.unobserve(item);
    const nodes = Array.from(chunk.children, (node) => document.importNode(node, true));
    item.replaceWith(...nodes);
    for (const node of nodes) {
      if (window.htmx) window.htmx.process(node);
      if (node.matches("li.steps-more")) watch(node);
    }
    if (item.dataset.after !== undefined && !laterItem()) catchUp();  // the end: steps recorded since
  }
  list.querySelectorAll("li.steps-more").forEach(watch);
  list.addEventListener("click", (event) => {
    const item = event.target.closest("li.steps-more");
    if (item && event.target.closest("a")) {
      event.preventDefault();
      loadChunk(item);
    }
  });

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;  // agent output is data, never markup
    return node;
  }
  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function add(step) {
    // A filtered list shows the steps the server matched; a live step is not known to match.
    if (list.dataset.filtered) return;
    if (document.getElementById(`step-${step.step}`)) return;
    const empty = document.getElementById("no-steps");
    if (empty) empty.remove();
    const li = el("li", "step");
    li.id = `step-${step.step}`;
    const head = el("div", "step-head");
    head.append(el("span", "step-no", `#${step.step}`), el("span", `badge action-${step.action_type}`, step.action_type));
    if (step.exit_code !== null && step.exit_code !== undefined) head.append(el("span", "exit", `exit ${step.exit_code}`));
    if (step.duration_ms) head.append(el("small", "", `${Number(step.duration_ms).toFixed(1)} ms`));
    li.append(head);
    if (step.thought) {
      const t = el("div", "thought");
      t.append(el("b", "", "Thought"), el("pre", "text", step.thought));
      li.append(t);
    }
    const a = el("div", "action");
    a.append(el("b", "", "Action"), el("pre", "code-block", pretty(step.action_input)));
    const o = el("div", "observation");
    o.append(el("b", "", "Observation"), el("pre", "text", step.observation || ""));
    li.append(a, o);
    // Keep the list ordered even if a late fetch and an event cross.
    const after = Array.from(list.querySelectorAll("li.step")).find((x) => Number(x.id.slice(5)) > step.step);
    list.insertBefore(li, after || null);
  }
  async function catchUp() {
    // While later steps are still to come from their item, only the header is wanted here.
    const later = laterItem();
    const where = later ? `after=${later.dataset.after}&limit=1` : `after=${lastShown()}`;
    const asked = generation;
    let body;
    try {
      const response = await fetch(`${list.dataset.api}?${where}`, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      body = await response.json();
    } catch (e) {
      return;  // offline: the next reconnect asks again
    }
    if (!current(body.attempt)) return;
    if (asked !== generation) return catchUp();  // a newer attempt dropped what was asked after
    if (!later) body.steps.forEach(add);
    if (status && body.status) status.textContent = body.status;
    // The header and provenance too: a reconnect, a return to the tab, or the rollout's end
    // (its provenance is written then) must not leave "Steps 0" or "–" behind.
    headerText("trajectory-steps", body.step_count);
    headerText("trajectory-termination", body.termination);
    headerText("provenance-policy", body.policy_kind);
    headerText("provenance-model", body.policy_model);
    const error = document.getElementById("trajectory-error");
    if (error && body.error !== undefined) {
      document.getElementById("trajectory-error-text").textContent = body.error;
      error.hidden = !body.error;
    }
  }
  function headerText(id, value) {
    const node = document.getElementById(id);
    if (node && value !== undefined && value !== null) node.textContent = value === "" ? "–" : String(value);
  }

  // Background work started from this page (replay, scoring) reports on the same group.
  // The result is drawn by the server: the page's own HTML is fetched again and the parts
  // that changed are swapped in, so nothing the agent wrote is ever built into markup here.
  async function fetchHtml(url) {
    try {
      const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      return response.ok ? new DOMParser().parseFromString(await response.text(), "text/html") : null;
    } catch (e) {
      return null;  // offline: the next reconnect resynchronises
    }
  }
  async function refresh(ids) {
    const fresh = await fetchHtml(location.href);
    if (!fresh) return;
    for (const id of ids) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (!now || !next) continue;
      const node = document.importNode(next, true);
      now.replaceWith(node);
      if (window.htmx) window.htmx.process(node);
    }
  }
  function replayProgress(event) {
    const report = document.getElementById("replay-report");
    const bar = document.getElementById("replay-progress");
    if (event.state === "running" && bar) {
      bar.max = Math.max(event.steps, 1);
      bar.value = event.done;
      const done = document.getElementById("replay-done");
      if (done) done.textContent = String(event.done);
    } else if (!report || report.dataset.state !== event.state || event.state !== "running") {
      refresh(["replay-report"]);
    }
  }
  function scoringProgress(event) {
    const line = document.getElementById("rescore-status");
    if (line) {
      line.dataset.state = event.state;
      const words = {
        running: "scoring: running the hidden tests in a fresh sandbox…",
        succeeded: `scored: reward ${Number(event.reward).toFixed(3)}${event.resolved ? ", resolved" : ", not resolved"}`,
        failed: `scoring failed: ${event.error || ""}`,
      };
      line.textContent = words[event.state] || event.state;
    }
    if (event.state !== "running") refresh(["outcome-card", "after-steps", "trajectory-status"]);
  }
  async function resync() {
    // After a reconnect, whatever was in flight may have ended while nobody listened.
    const report = document.getElementById("replay-report");
    if (report && ["queued", "running"].includes(report.dataset.state)) refresh(["replay-report"]);
    const line = document.getElementById("rescore-status");
    if (line && line.dataset.poll && ["queued", "running"].includes(line.dataset.state)) {
      const page = await fetchHtml(line.dataset.poll);
      const fresh = page && page.getElementById("rescore-status");
      if (fresh) {
        line.replaceWith(document.importNode(fresh, true));
        if (fresh.dataset.state === "succeeded") refresh(["outcome-card", "after-steps"]);
      }
    }
  }

  // A job can end before the button's answer is swapped in; look once more after each swap.
  document.body.addEventListener("htmx:afterSettle", () => resync());

  window.CrucibleLive.subscribe(list.dataset.group, (event) => {
    if (event.kind === "subscribed") { catchUp(); resync(); }
    else if (event.kind === "resync") { catchUp(); resync(); }
    else if (event.kind === "attempt") {
      if (current(event.attempt)) catchUp();
    } else if (event.kind === "steps") {
      if (!current(event.attempt)) return;
      if (!laterItem()) event.steps.forEach(add);
      const top = Math.max(lastShown(), ...event.steps.map((step) => step.step));
      if (top) headerText("trajectory-steps", top);
    } else if (event.kind === "finished") {
      if (status) status.textContent = event.status;
      catchUp();
    }
    else if (event.kind === "replay") replayProgress(event);
    else if (event.kind === "scoring") scoringProgress(event);
  });
})();
