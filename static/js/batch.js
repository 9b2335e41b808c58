// Live progress of a rollout batch: counts, progress bar, per-trajectory rows and their errors.
// Events move the page along; after a reconnect or a return to the tab, the page repaints from
// /batches/<id>/state/ (trajectories.batch_views.batch_state), so a missed event never leaves a
// row stale. Field names follow trajectories/events.py.
(function () {
  "use strict";
  const root = document.getElementById("batch");
  if (!root || !window.CrucibleLive) return;
  const byId = (id) => document.getElementById(id);
  let fetching = null;
  let again = false;

  function row(trajectoryId) {
    for (const tr of root.querySelectorAll("tr[data-trajectory]")) {
      if (tr.dataset.trajectory === trajectoryId) return tr;
    }
    return null;
  }
  function set(tr, field, value) {
    const cell = tr && tr.querySelector(`[data-field="${field}"]`);
    if (cell && value !== undefined && value !== null) cell.textContent = String(value);  // agent text stays text
  }
  function counts(c) {
    byId("batch-finished").textContent = String(c.finished);
    byId("batch-failed").textContent = String(c.failed);
    byId("batch-left").textContent = String(c.left);
    byId("batch-progress").value = c.finished + c.failed;
  }
  function paintRow(tr, r) {
    if (!tr) return;
    set(tr, "status", r.status);
    set(tr, "steps", r.steps);
    set(tr, "termination", r.termination || "–");
    set(tr, "error", r.error || "");
    tr.classList.toggle("failed", r.status === "failed");
  }
  function paintErrors(errors) {
    const box = byId("batch-errors");
    if (!box) return;
    const list = box.querySelector("ul");
    list.replaceChildren();
    for (const [text, n] of errors) {
      const li = document.createElement("li");
      const count = document.createElement("b");
      count.textContent = `${n} ×`;
      const pre = document.createElement("pre");
      pre.className = "text error-text";
      pre.textContent = text;
      li.append(count, pre);
      list.append(li);
    }
    box.hidden = errors.length === 0;
  }

  async function resync() {
    // One request at a time; an ask while one is out is answered by one more after it.
    if (fetching) { again = true; return fetching; }
    fetching = (async () => {
      try {
        const response = await fetch(root.dataset.state, { credentials: "same-origin", cache: "no-store" });
        if (!response.ok) return;
        const state = await response.json();
        for (const r of state.rows) paintRow(row(r.trajectory_id), r);
        counts(state);
        paintErrors(state.errors);
        byId("batch-status").textContent = state.status;
        root.dataset.synced = String(Date.now());
      } catch (e) {
        // Offline: the next reconnect asks again.
      } finally {
        fetching = null;
        if (again) { again = false; resync(); }
      }
    })();
    return fetching;
  }

  window.CrucibleLive.subscribe(root.dataset.group, (event) => {
    if (event.kind === "subscribed" || event.kind === "resync") {
      resync();
    } else if (event.kind === "step") {
      const tr = row(event.trajectory_id);
      set(tr, "steps", event.step);
      set(tr, "status", "running");
      if (byId("batch-status").textContent === "queued") byId("batch-status").textContent = "running";
    } else if (event.kind === "trajectory") {
      paintRow(row(event.trajectory_id), event);
      counts(event);
      if (event.batch_status) byId("batch-status").textContent = event.batch_status;
      // The distinct errors are counted by the server.
      if (event.status === "failed") resync();
    } else if (event.kind === "status") {
      byId("batch-status").textContent = event.status;
      resync();  // a cancel also cancelled the queued rows
    }
  });
})();
