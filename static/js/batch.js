// Live progress of a rollout batch: counts, progress bar and per-trajectory rows.
(function () {
  "use strict";
  const root = document.getElementById("batch");
  if (!root || !window.CrucibleLive) return;
  const byId = (id) => document.getElementById(id);

  function row(trajectoryId) {
    for (const tr of root.querySelectorAll("tr[data-trajectory]")) {
      if (tr.dataset.trajectory === trajectoryId) return tr;
    }
    return null;
  }
  function set(tr, field, value) {
    const cell = tr && tr.querySelector(`[data-field="${field}"]`);
    if (cell && value !== undefined && value !== null) cell.textContent = String(value);
  }

  window.CrucibleLive.subscribe(root.dataset.group, (event) => {
    if (event.kind === "step") {
      const tr = row(event.trajectory_id);
      set(tr, "steps", event.step);
      set(tr, "status", "running");
      byId("batch-status").textContent = "running";
    } else if (event.kind === "trajectory") {
      const tr = row(event.trajectory_id);
      set(tr, "status", event.status);
      set(tr, "steps", event.steps);
      set(tr, "termination", event.termination || "–");
      byId("batch-finished").textContent = String(event.finished);
      byId("batch-failed").textContent = String(event.failed);
      byId("batch-left").textContent = String(event.left);
      byId("batch-progress").value = event.finished + event.failed;
      if (event.batch_status) byId("batch-status").textContent = event.batch_status;
    } else if (event.kind === "status") {
      byId("batch-status").textContent = event.status;
    }
  });
})();
