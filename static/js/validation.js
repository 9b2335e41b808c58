// Live progress of a validation run. Server-rendered state first; events update it.
// Every value goes in through textContent: task ids and errors are data, not markup.
(function () {
  "use strict";
  const root = document.getElementById("validation");
  if (!root || !window.CrucibleLive) return;
  const progress = document.getElementById("run-progress");
  const count = document.getElementById("run-count");
  const status = document.getElementById("run-status");
  const error = document.getElementById("run-error");

  function setTask(taskId, value) {
    for (const cell of root.querySelectorAll("[data-task]")) {
      if (cell.dataset.task === taskId) {
        cell.textContent = value;
        cell.className = `badge status-${value}`;
      }
    }
  }

  window.CrucibleLive.subscribe(root.dataset.group, (event) => {
    if (event.kind === "task") {
      setTask(event.task_id, event.status);
      progress.value = event.done;
      count.textContent = String(event.done);
      status.textContent = "running";
    } else if (event.kind === "finished") {
      status.textContent = event.status;
      error.textContent = event.error || "";
      progress.value = event.done;
      count.textContent = String(event.done);
    }
  });
})();
