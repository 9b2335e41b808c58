// A running trajectory's steps arrive live. The page was rendered with the steps that
// existed then; after subscribing it asks the API for anything newer, and from then on
// events add steps. A step number already shown is never added twice.
(function () {
  "use strict";
  const list = document.getElementById("steps");
  if (!list || !window.CrucibleLive) return;
  const shown = new Set(Array.from(list.querySelectorAll("li.step")).map((li) => Number(li.id.replace("step-", ""))));
  const status = document.getElementById("trajectory-status");

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;  // agent output is data, never markup
    return node;
  }
  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function add(step) {
    if (shown.has(step.step)) return;
    shown.add(step.step);
    const empty = document.getElementById("no-steps");
    if (empty) empty.remove();
    const li = el("li", "step");
    li.id = `step-${step.step}`;
    const head = el("div", "step-head");
    head.append(el("span", "step-no", `#${step.step}`), el("span", `badge action-${step.action_type}`, step.action_type));
    if (step.exit_code !== null && step.exit_code !== undefined) head.append(el("span", "exit", `exit ${step.exit_code}`));
    if (step.duration_ms) head.append(el("small", "", `${Number(step.duration_ms).toFixed(1)} ms`));
    li.append(head);
    if (step.thought) {
      const t = el("div", "thought");
      t.append(el("b", "", "Thought"), el("pre", "text", step.thought));
      li.append(t);
    }
    const a = el("div", "action");
    a.append(el("b", "", "Action"), el("pre", "code-block", pretty(step.action_input)));
    const o = el("div", "observation");
    o.append(el("b", "", "Observation"), el("pre", "text", step.observation || ""));
    li.append(a, o);
    // Keep the list ordered even if a late fetch and an event cross.
    const after = Array.from(list.querySelectorAll("li.step")).find((x) => Number(x.id.slice(5)) > step.step);
    list.insertBefore(li, after || null);
  }
  async function catchUp() {
    const last = shown.size ? Math.max(...shown) : 0;
    const response = await fetch(`${list.dataset.api}?after=${last}`, { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    body.steps.forEach(add);
    if (status && body.status) status.textContent = body.status;
  }

  window.CrucibleLive.subscribe(list.dataset.group, (event) => {
    if (event.kind === "subscribed") catchUp();
    else if (event.kind === "steps") event.steps.forEach(add);
    else if (event.kind === "finished" && status) status.textContent = event.status;
  });
})();
