// Keyboard-first review: j/k next/previous step, n/p next/previous trajectory,
// g/G first/last step, e/c expand/collapse every long text, l label the current step. Full texts of long
// observations load on demand, always through textContent.
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
  async function expand(button) {
    const li = button.closest("li.step");
    const pre = li.querySelector(`pre[data-full="${button.dataset.field}"]`);
    const number = Number(button.dataset.step);
    const response = await fetch(`${list.dataset.api}?after=${number - 1}&limit=1`, { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    if (body.steps.length) {
      pre.textContent = body.steps[0][button.dataset.field] || "";
      button.remove();
    }
  }
  function collapse() {
    for (const pre of list.querySelectorAll("pre.text")) pre.classList.add("collapsed");
  }
  function uncollapse() {
    for (const pre of list.querySelectorAll("pre.text")) pre.classList.remove("collapsed");
    list.querySelectorAll("button.more").forEach((b) => expand(b));
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
      case "g": focus(0); break;
      case "G": focus(steps().length - 1); break;
      case "n": go(review.dataset.next); break;
      case "p": go(review.dataset.previous); break;
      case "e": uncollapse(); break;
      case "c": collapse(); break;
      case "l": {
        const select = current >= 0 && steps()[current].querySelector(".label-form select");
        if (select) select.focus();
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
  const fromHash = steps().findIndex((li) => `#${li.id}` === location.hash);
  if (fromHash >= 0) focus(fromHash);
})();
