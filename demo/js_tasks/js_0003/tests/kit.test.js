import { describe, expect, test } from "vitest";
import { capitalize, paginate, range } from "../src/kit.js";

const items = [1, 2, 3, 4, 5];

describe("paginate", () => {
  test("returns the first page", () => {
    expect(paginate(items, 1, 2)).toEqual([1, 2]);
  });
  test("returns a short last page", () => {
    expect(paginate(items, 3, 2)).toEqual([5]);
  });
  test("is empty past the last page", () => {
    expect(paginate(items, 4, 2)).toEqual([]);
    expect(paginate(items, 0, 2)).toEqual([]);
  });
});

describe("capitalize", () => {
  test("upper-cases the first letter", () => {
    expect(capitalize("hello world")).toBe("Hello world");
  });
  test("leaves the empty string alone", () => {
    expect(capitalize("")).toBe("");
  });
});

describe("range", () => {
  test("counts up to the end, not including it", () => {
    expect(range(0, 4)).toEqual([0, 1, 2, 3]);
    expect(range(1, 8, 3)).toEqual([1, 4, 7]);
  });
  test("counts down without reaching the end", () => {
    expect(range(5, 0, -1)).toEqual([5, 4, 3, 2, 1]);
    expect(range(3, 3, -1)).toEqual([]);
  });
  test("refuses a step of zero", () => {
    expect(() => range(0, 3, 0)).toThrow(RangeError);
  });
});
