// The agreement trend: one line per series, share of agreeing judgements per bucket.
document.addEventListener("DOMContentLoaded", () => {
  const target = document.getElementById("agreement-trend");
  const data = document.getElementById("agreement-chart");
  if (!target || !data || !window.Plotly) return;
  const chart = JSON.parse(data.textContent);
  const traces = Object.entries(chart.series).map(([name, ys]) => ({
    x: chart.x, y: ys, name, type: "scatter", mode: "lines+markers", connectgaps: true,
  }));
  window.Plotly.newPlot(target, traces, {
    margin: { t: 10, r: 10, b: 40, l: 50 },
    yaxis: { range: [0, 1.05], title: { text: "agreement" } },
    legend: { orientation: "h" },
  }, { displayModeBar: false, responsive: true });
});
