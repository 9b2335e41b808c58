// Training pages: the launch form's examples, and a run's metric charts kept live over /ws/.
(function () {
  "use strict";

  // Launch form: start from the example config of a kind.
  const picker = document.getElementById("config-example");
  const examplesTag = document.getElementById("config-examples");
  if (picker && examplesTag) {
    const examples = JSON.parse(examplesTag.textContent);
    const area = document.querySelector("#launch-run textarea[name=config]");
    picker.addEventListener("change", () => {
      if (area && examples[picker.value]) area.value = examples[picker.value];
    });
  }

  const root = document.getElementById("run");
  if (!root) return;
  const charts = document.getElementById("metric-charts");
  const rules = JSON.parse(document.getElementById("chart-rules").textContent)
    .map((rule) => ({ ...rule, re: rule.pattern ? new RegExp(rule.pattern) : null }));
  const smoothing = document.getElementById("chart-smoothing");
  const smoothingShown = document.getElementById("chart-smoothing-value");
  const scale = document.getElementById("chart-scale");
  const search = document.getElementById("chart-search");
  const seen = new Map(); // metric name -> chart div
  const series = new Map(); // metric name -> {x: steps, y: values}
  let lastStep = -1;
  let count = 0;

  // Metric names come from a trainer's log: they reach the page only as text content and as
  // Map keys, never as markup, a selector, or a Plotly title (Plotly reads tags in titles).
  function groupFor(name) {
    const rule = rules.find((r) => r.re && r.re.test(name.toLowerCase())) || rules[rules.length - 1];
    for (const el of charts.querySelectorAll("section[data-chart-group]")) {
      if (el.dataset.chartGroup === rule.kind) return el.querySelector(".chart-grid");
    }
    const section = document.createElement("section");
    section.className = "chart-group";
    section.dataset.chartGroup = rule.kind;
    const title = document.createElement("h3");
    title.textContent = rule.title;
    const grid = document.createElement("div");
    grid.className = "chart-grid";
    section.append(title, grid);
    // Groups keep the rules' order, wherever a group first seen live belongs.
    const order = rules.map((r) => r.kind);
    const after = [...charts.querySelectorAll("section[data-chart-group]")]
      .find((el) => order.indexOf(el.dataset.chartGroup) > order.indexOf(rule.kind));
    charts.insertBefore(section, after || null);
    return grid;
  }

  function chartFor(name) {
    if (seen.has(name)) return seen.get(name);
    let div = null;
    for (const el of charts.querySelectorAll(".metric-chart[data-metric]")) if (el.dataset.metric === name) div = el;
    if (!div) {
      const cell = document.createElement("figure");
      cell.className = "metric-cell";
      const caption = document.createElement("figcaption");
      caption.textContent = name;
      div = document.createElement("div");
      div.className = "metric-chart";
      div.dataset.metric = name;
      cell.append(caption, div);
      // By name within a group, as the server orders them.
      const grid = groupFor(name);
      const next = [...grid.querySelectorAll(".metric-chart[data-metric]")].find((el) => el.dataset.metric > name);
      grid.insertBefore(cell, next ? next.parentElement : null);
    }
    seen.set(name, div);
    series.set(name, { x: [], y: [] });
    applySearch();
    return div;
  }

  // Find: only the charts whose metric name holds the text (a group with none left is hidden).
  function applySearch() {
    const text = search ? search.value.trim().toLowerCase() : "";
    for (const cell of charts.querySelectorAll(".metric-cell")) {
      const wasHidden = cell.hidden;
      cell.hidden = text !== "" && !cell.querySelector("figcaption").textContent.toLowerCase().includes(text);
      const div = cell.querySelector(".metric-chart");
      if (wasHidden && !cell.hidden && window.Plotly && div.data) window.Plotly.Plots.resize(div);
    }
    for (const group of charts.querySelectorAll("section[data-chart-group]")) {
      group.hidden = ![...group.querySelectorAll(".metric-cell")].some((cell) => !cell.hidden);
    }
  }
  if (search) search.addEventListener("input", applySearch);

  // Debiased exponential moving average (as TensorBoard's): the first points are not pulled to 0.
  function ema(ys, weight) {
    const out = [];
    let last = 0;
    let n = 0;
    for (const y of ys) {
      if (typeof y !== "number" || !Number.isFinite(y)) { out.push(null); continue; }
      last = last * weight + (1 - weight) * y;
      n += 1;
      out.push(weight > 0 ? last / (1 - Math.pow(weight, n)) : y);
    }
    return out;
  }

  function niceStep(span, ticks) {
    const raw = Math.max(span / ticks, 1);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].find((m) => m * power >= raw) * power;
    return Math.max(1, step);
  }

  // Plotly's autorange draws a constant series on value ± 1 (a learning rate of 1e-5 reads 0),
  // so the y range is fitted here; log where every value is positive and they span over 10x.
  function yAxis(ys) {
    const finite = ys.filter((y) => typeof y === "number" && Number.isFinite(y));
    if (!finite.length) return { type: "linear", autorange: true };
    const lo = Math.min(...finite);
    const hi = Math.max(...finite);
    const wanted = scale ? scale.value : "auto";
    const positive = lo > 0;
    const log = positive && (wanted === "log" || (wanted === "auto" && hi / lo > 10));
    if (log) {
      const a = Math.log10(lo);
      const b = Math.log10(hi);
      const pad = Math.max((b - a) * 0.06, 0.05);
      // Over two decades, label the powers of ten only: the 2s and 5s between crowd a small chart.
      return { type: "log", range: [a - pad, b + pad], exponentformat: "power", ...(b - a >= 2 ? { dtick: 1 } : {}) };
    }
    const pad = hi > lo ? (hi - lo) * 0.08 : Math.abs(hi) * 0.1 || 1;
    const size = Math.max(Math.abs(lo), Math.abs(hi));
    const tickformat = size >= 1e4 ? "~s" : size > 0 && size < 1e-3 ? "~e" : "~g";
    return { type: "linear", range: [lo - pad, hi + pad], tickformat };
  }

  function draw(name) {
    const div = seen.get(name);
    const data = series.get(name);
    if (!div || !data || !window.Plotly) return;
    const weight = smoothing ? Number(smoothing.value) : 0;
    const first = data.x.length ? data.x[0] : 0;
    const last = data.x.length ? data.x[data.x.length - 1] : 1;
    const span = Math.max(last - first, 1);
    const layout = {
      margin: { t: 8, r: 12, b: 30, l: 58 },
      showlegend: false,
      xaxis: {
        tickformat: "d", tick0: 0, dtick: niceStep(span, 5), tickmode: "linear",
        range: [first - Math.max(span * 0.03, 0.5), last + Math.max(span * 0.03, 0.5)],
        hoverformat: "d",
      },
      yaxis: yAxis(data.y),
    };
    const traces = [
      {
        x: data.x.slice(), y: data.y.slice(), name: "raw", mode: data.x.length > 60 ? "lines" : "lines+markers",
        line: { color: "#3355cc", width: 1 }, marker: { size: 4 }, opacity: weight > 0 ? 0.3 : 1,
        hovertemplate: "step %{x}: %{y:.5g}<extra>raw</extra>",
      },
      {
        x: data.x.slice(), y: weight > 0 ? ema(data.y, weight) : [], name: "smoothed", mode: "lines",
        line: { color: "#3355cc", width: 2 }, hovertemplate: "step %{x}: %{y:.5g}<extra>smoothed</extra>",
      },
    ];
    window.Plotly.react(div, traces, layout, { displayModeBar: false, responsive: true });
  }

  function redrawAll() {
    for (const name of seen.keys()) draw(name);
  }
  if (smoothing) {
    smoothing.addEventListener("input", () => {
      if (smoothingShown) smoothingShown.textContent = Number(smoothing.value).toFixed(2);
      redrawAll();
    });
  }
  if (scale) scale.addEventListener("change", redrawAll);

  function setLatest(name, value) {
    const list = document.getElementById("latest-metrics");
    if (!list) return;
    let dd = null;
    for (const el of list.querySelectorAll("dd[data-metric]")) if (el.dataset.metric === name) dd = el;
    if (!dd) {
      if (!list.querySelector("dd[data-metric]")) list.textContent = "";
      const dt = document.createElement("dt");
      dt.textContent = name;
      dd = document.createElement("dd");
      dd.dataset.metric = name;
      list.append(dt, dd);
    }
    dd.textContent = Number(value).toPrecision(5);
  }

  function add(rows) {
    const byName = new Map();
    for (const row of rows) {
      if (row.step <= lastStep) continue;
      lastStep = row.step;
      count += 1;
      for (const [name, value] of Object.entries(row.values || {})) {
        if (!byName.has(name)) byName.set(name, { x: [], y: [] });
        byName.get(name).x.push(row.step);
        byName.get(name).y.push(value);
        setLatest(name, value);
      }
    }
    for (const [name, data] of byName) {
      chartFor(name);
      const all = series.get(name);
      all.x.push(...data.x);
      all.y.push(...data.y);
      draw(name);
    }
    const counter = document.getElementById("metric-count");
    if (counter) counter.textContent = String(count);
    const empty = document.getElementById("metrics-empty");
    if (empty && count > 0) empty.hidden = true;
    root.dataset.points = String(count);
  }

  function catchUp() {
    fetch(`${root.dataset.metricsUrl}?after=${lastStep}`, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((data) => {
        if (!data) return;
        add(data.metrics);
        setStatus(data.status);
      })
      .catch(() => {});
  }

  function setStatus(status, error) {
    const badge = document.getElementById("run-status");
    if (badge && status) badge.textContent = status;
    const err = document.getElementById("run-error");
    if (err && error) err.textContent = error;
    if (status && status !== "queued" && status !== "running") {
      const cancel = document.getElementById("cancel-run");
      if (cancel) cancel.remove();
    }
  }

  function addCheckpoint(event) {
    const body = document.querySelector("#checkpoints tbody");
    if (!body) return;
    for (const tr of body.querySelectorAll("tr[data-checkpoint]")) if (tr.dataset.checkpoint === String(event.id)) return;
    const empty = body.querySelector("tr.empty");
    if (empty) empty.remove();
    const tr = document.createElement("tr");
    tr.dataset.checkpoint = String(event.id);
    for (const text of [event.id, "", event.step, event.path]) {
      const td = document.createElement("td");
      td.textContent = String(text);
      tr.appendChild(td);
    }
    const note = document.createElement("td");
    note.colSpan = 5;
    note.textContent = "reload the page for its lineage";
    tr.appendChild(note);
    body.appendChild(tr);
  }

  add(JSON.parse(document.getElementById("run-metrics").textContent));
  if (!window.CrucibleLive) return;
  window.CrucibleLive.subscribe(root.dataset.group, (event) => {
    if (event.kind === "subscribed") catchUp();
    else if (event.kind === "metric") add([{ step: event.step, values: event.values }]);
    else if (event.kind === "status") setStatus(event.status, event.error);
    else if (event.kind === "checkpoint") addCheckpoint(event);
  });
})();
