// Dashboard (docs/scaling.md): sampling throughput, training throughput and sandbox start-up, hour by hour.
(function () {
  "use strict";
  const tag = document.getElementById("dashboard-timeline");
  if (!tag || !window.Plotly) return;
  const data = JSON.parse(tag.textContent);
  const charts = [
    ["chart-sampling", "per_hour", "trajectories / hour of rollout time"],
    ["chart-training", "steps_per_minute", "training steps / minute"],
    ["chart-startup", "startup_ms", "avg sandbox start-up (ms)"],
  ];
  for (const [id, key, title] of charts) {
    const div = document.getElementById(id);
    if (!div) continue;
    window.Plotly.newPlot(div, [{ x: data.hour, y: data[key], type: "bar", name: title }], {
      title: { text: title, font: { size: 13 } }, margin: { t: 32, r: 12, b: 36, l: 48 }, xaxis: { type: "date" },
    }, { displayModeBar: false, responsive: true }).then(() => { div.dataset.ready = "1"; });
  }
})();
