/** The items of 1-based page `page`, `perPage` to a page; [] before the first page or past the last. */
export function paginate(items, page, perPage) {
  if (page < 1 || perPage < 1) return [];
  const start = page * perPage;
  return items.slice(start, start + perPage);
}

/** The text with its first character upper-cased; "" stays "". */
export function capitalize(text) {
  if (text.length === 0) return "";
  return text[0].toUpperCase() + text.slice(1);
}

/** The numbers from `start` up to, not including, `end`, `step` apart; a negative step counts down. */
export function range(start, end, step = 1) {
  if (step === 0) throw new RangeError("step must not be 0");
  const out = [];
  for (let i = start; step > 0 ? i < end : i > end; i += step) out.push(i);
  return out;
}
