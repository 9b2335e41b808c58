// Keyboard-first pairwise review: 1/a left, 2/b right, 3/t tie, 4/x both bad (the reason box
// takes the focus), Enter submits, Shift+Enter is a new line, Esc leaves the box, s skips,
// u undoes the last verdict (the button is there only while the server would allow it).
// The server answers a submit with the next pair's page, so the next pair loads by itself.
(function () {
  "use strict";
  const form = document.getElementById("judgement");
  if (!form) return;
  const reason = form.querySelector("textarea[name=reason]");
  const skip = document.getElementById("skip");
  const undo = document.getElementById("undo");
  const KEYS = { "1": "A", a: "A", "2": "B", b: "B", "3": "tie", t: "tie", "4": "both_bad", x: "both_bad" };
  let sent = false;

  function choose(value) {
    const radio = form.querySelector(`input[name=choice][value="${value}"]`);
    if (!radio) return;
    radio.checked = true;
    form.querySelector("fieldset.choices").classList.remove("missing");
    form.querySelectorAll("label.choice").forEach((l) => l.classList.toggle("chosen", l.dataset.choice === value));
    reason.focus();
  }
  function submit(target) {
    if (sent) return;  // one submit per pair: a held Enter must not send twice
    sent = true;
    target.requestSubmit();
  }

  form.addEventListener("change", (event) => {
    if (event.target.name === "choice") choose(event.target.value);
  });
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!form.querySelector("input[name=choice]:checked")) {
        form.querySelector("fieldset.choices").classList.add("missing");  // say what is missing
        return;
      }
      if (!reason.value.trim()) return;
      submit(form);
    } else if (event.key === "Escape") {
      reason.blur();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target instanceof HTMLTextAreaElement || (target instanceof HTMLInputElement && target.type === "text")) return;
    const key = event.key.toLowerCase();
    if (key in KEYS) {
      event.preventDefault();
      choose(KEYS[key]);
    } else if (key === "s" && skip) {
      event.preventDefault();
      submit(skip);
    } else if (key === "u" && undo) {
      event.preventDefault();
      submit(undo);
    } else if (key === "enter" && target === document.body) {
      event.preventDefault();
      if (form.querySelector("input[name=choice]:checked") && reason.value.trim()) submit(form);
      else reason.focus();
    }
  });
  form.addEventListener("submit", () => { sent = true; });
  const checked = form.querySelector("input[name=choice]:checked");
  if (checked) choose(checked.value);
})();
