// Reward vs pass@k (docs/training.md): the training reward curve and each checkpoint's pass@k on one chart.
(function () {
  "use strict";
  const div = document.getElementById("reward-vs-pass");
  const dataTag = document.getElementById("reward-vs-pass-data");
  if (!div || !dataTag || !window.Plotly) return;
  const data = JSON.parse(dataTag.textContent);
  const passTitle = "pass@" + data.k;
  const passRange = [-0.03, 1.03];
  const layout = { margin: { t: 24, r: 56, b: 40, l: 56 }, xaxis: { title: { text: "training step" } }, legend: { orientation: "h" } };
  let traces;
  if (data.reward.x.length) {
    traces = [
      { x: data.reward.x, y: data.reward.y, mode: "lines", name: "training reward", yaxis: "y" },
      { x: data.pass.x, y: data.pass.y, mode: "lines+markers", name: passTitle + " (eval)", yaxis: "y2" },
    ];
    layout.yaxis = { title: { text: "reward" } };
    layout.yaxis2 = { title: { text: passTitle }, overlaying: "y", side: "right", range: passRange };
  } else {
    // No reward logged (an SFT run logs a loss): pass@k alone, on the only axis, not beside an empty one.
    traces = [{ x: data.pass.x, y: data.pass.y, mode: "lines+markers", name: passTitle + " (eval)" }];
    layout.yaxis = { title: { text: passTitle }, range: passRange };
  }
  window.Plotly.newPlot(div, traces, layout, { displayModeBar: false, responsive: true })
    .then(() => { div.dataset.ready = "1"; });
})();
