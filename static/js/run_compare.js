// Runs overlaid (training/run_compare.py): one chart per metric, a curve per run that logged it.
(function () {
  "use strict";
  const dataTag = document.getElementById("overlay-series");
  if (!dataTag || !window.Plotly) return;
  const series = JSON.parse(dataTag.textContent);
  document.querySelectorAll(".overlay-chart").forEach((div) => {
    const metric = div.dataset.metric;
    const traces = (series[metric] || []).map((t) => ({ x: t.x, y: t.y, name: t.name, mode: "lines" }));
    window.Plotly.newPlot(div, traces, {
      title: { text: metric, font: { size: 13 } },
      margin: { t: 32, r: 16, b: 36, l: 48 },
      height: 240,
      xaxis: { title: { text: "step" }, tickformat: "d" },
      legend: { orientation: "h" },
    }, { displayModeBar: false, responsive: true }).then(() => { div.dataset.ready = "1"; });
  });
})();
