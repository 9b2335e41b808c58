// The agreement trend: one line per series, share of agreeing judgements per bucket.
document.addEventListener("DOMContentLoaded", () => {
  const target = document.getElementById("agreement-trend");
  const data = document.getElementById("agreement-chart");
  if (!target || !data || !window.Plotly) return;
  const chart = JSON.parse(data.textContent);
  const DAY = 86400000;
  // Each point is a bucket's first day (YYYY-MM-DD). Plotly's own range and ticks for one day of
  // judgements zoom into milliseconds ("23:59:59.9995"): both are set here in whole buckets.
  const bucket = (target.dataset.bucket === "week" ? 7 : 1) * DAY;
  const times = chart.x.map((day) => Date.parse(`${day}T00:00:00Z`));
  const first = Math.min(...times);
  const last = Math.max(...times);
  const buckets = Math.round((last - first) / bucket) + 1;
  const format = target.dataset.bucket === "week" ? "week of %-d %b %Y" : "%-d %b %Y";
  const traces = Object.entries(chart.series).map(([name, ys]) => ({
    x: chart.x, y: ys, name, type: "scatter", mode: "lines+markers", connectgaps: true,
  }));
  window.Plotly.newPlot(target, traces, {
    margin: { t: 10, r: 10, b: 40, l: 50 },
    xaxis: {
      type: "date", range: [first - bucket / 2, last + bucket / 2], tick0: chart.x[0],
      dtick: bucket * Math.max(1, Math.ceil(buckets / 8)), tickformat: "%-d %b %Y", hoverformat: format,
    },
    yaxis: { range: [0, 1.05], title: { text: "agreement" } },
    // Below the axis's dates, not over them: Plotly widens the bottom margin to fit it.
    legend: { orientation: "h", x: 0, xanchor: "left", y: -0.18, yanchor: "top" },
  }, { displayModeBar: false, responsive: true });
});
