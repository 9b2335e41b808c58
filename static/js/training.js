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
  const seen = new Map(); // metric name -> chart div
  let lastStep = -1;
  let count = 0;

  function chartFor(name) {
    if (seen.has(name)) return seen.get(name);
    const div = document.createElement("div");
    div.className = "metric-chart";
    div.dataset.metric = name;
    div.style.height = "240px";
    charts.appendChild(div);
    seen.set(name, div);
    if (window.Plotly) {
      window.Plotly.newPlot(div, [{ x: [], y: [], mode: "lines+markers", name }], {
        title: { text: name }, margin: { t: 36, r: 16, b: 36, l: 56 }, xaxis: { title: { text: "step" } },
      }, { displayModeBar: false, responsive: true });
    }
    return div;
  }

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
      const div = chartFor(name);
      if (window.Plotly) window.Plotly.extendTraces(div, { x: [data.x], y: [data.y] }, [0]);
    }
    const counter = document.getElementById("metric-count");
    if (counter) counter.textContent = String(count);
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
