// Reward vs pass@k (docs/training.md): the training reward curve and each checkpoint's pass@k on one chart.
(function () {
  "use strict";
  const div = document.getElementById("reward-vs-pass");
  const dataTag = document.getElementById("reward-vs-pass-data");
  if (!div || !dataTag || !window.Plotly) return;
  const data = JSON.parse(dataTag.textContent);
  window.Plotly.newPlot(div, [
    { x: data.reward.x, y: data.reward.y, mode: "lines", name: "training reward", yaxis: "y" },
    { x: data.pass.x, y: data.pass.y, mode: "lines+markers", name: "pass@" + data.k + " (eval)", yaxis: "y2" },
  ], {
    margin: { t: 24, r: 56, b: 40, l: 56 },
    xaxis: { title: { text: "training step" } },
    yaxis: { title: { text: "reward" } },
    yaxis2: { title: { text: "pass@" + data.k }, overlaying: "y", side: "right", range: [-0.03, 1.03] },
    legend: { orientation: "h" },
  }, { displayModeBar: false, responsive: true }).then(() => { div.dataset.ready = "1"; });
})();
