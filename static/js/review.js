// Keyboard-first review: j/k next/previous step, n/p next/previous trajectory,
// g/G first/last step, e expands every long text and c puts them back, l labels the current step. Full texts of long
// observations load on demand, always through textContent. Only a chunk of a long trajectory's steps is
// loaded (trajectory.js): a step, or a timeline tick, beyond them opens the page from that step.
(function () {
  "use strict";
  const review = document.getElementById("review");
  const list = document.getElementById("steps");
  if (!review || !list) return;
  let current = -1;

  function steps() { return Array.from(list.querySelectorAll("li.step")); }
  function focus(index) {
    const all = steps();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((li, i) => li.classList.toggle("current", i === current));
    all[current].scrollIntoView({ block: "center" });
    history.replaceState(null, "", `#${all[current].id}`);
  }
  // What each expanded text showed before, so `c` puts the page back as `e` found it.
  const heads = new Map();

  // The first or last step of the trajectory: shown, or the page from it (its timeline tick's link).
  function ends(index, tick, more) {
    const link = document.querySelector(`.timeline a.tick:${tick}`);
    if (link && list.querySelector(`li.steps-more[data-${more}]`)) location.href = link.href;
    else focus(index);
  }

  async function expand(button) {
    const li = button.closest("li.step");
    const pre = li.querySelector(`pre[data-full="${button.dataset.field}"]`);
    if (heads.has(pre)) return;
    const number = Number(button.dataset.step);
    const response = await fetch(`${list.dataset.api}?after=${number - 1}&limit=1`, { credentials: "same-origin" });
    if (!response.ok || heads.has(pre)) return;
    const body = await response.json();
    if (body.steps.length) {
      heads.set(pre, { nodes: Array.from(pre.childNodes, (n) => n.cloneNode(true)), button });
      pre.textContent = body.steps[0][button.dataset.field] || "";
      pre.classList.add("expanded");
      button.hidden = true;
    }
  }
  function expandAll() {
    list.querySelectorAll("button.more:not([hidden])").forEach((b) => expand(b));
  }
  function collapseAll() {
    for (const [pre, head] of heads) {
      pre.replaceChildren(...head.nodes);
      pre.classList.remove("expanded");
      head.button.hidden = false;
    }
    heads.clear();
  }

  list.addEventListener("click", (event) => {
    const button = event.target.closest("button.more");
    if (button) expand(button);
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
    const go = (url) => { if (url) location.href = url; };
    switch (event.key) {
      case "j": focus(current + 1); break;
      case "k": focus(current - 1); break;
      case "g": ends(0, "first-child", "before"); break;
      case "G": ends(steps().length - 1, "last-child", "after"); break;
      case "n": go(review.dataset.next); break;
      case "p": go(review.dataset.previous); break;
      case "e": expandAll(); break;
      case "c": collapseAll(); break;
      case "l": {
        const select = current >= 0 && steps()[current].querySelector(".label-form select");
        if (select) select.focus();
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
  // A tick of a step already shown scrolls to it; one beyond opens the page from there.
  document.addEventListener("click", (event) => {
    const tick = event.target.closest(".timeline a.tick");
    const index = tick ? steps().findIndex((li) => `#${li.id}` === new URL(tick.href).hash) : -1;
    if (index >= 0) {
      event.preventDefault();
      focus(index);
    }
  });
  const fromHash = steps().findIndex((li) => `#${li.id}` === location.hash);
  const wanted = /^#step-(\d+)$/.exec(location.hash);
  if (fromHash >= 0) focus(fromHash);
  else if (wanted && new URLSearchParams(location.search).get("from") !== wanted[1]) {
    location.replace(`?from=${wanted[1]}${location.hash}`);  // a link to a step not in the first chunk
  }
})();
