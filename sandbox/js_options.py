"""What a JavaScript repository's own Jest configuration says about how its tests behave, read as data.

The harness writes its own Jest configuration and never loads the repository's: jest.config.* is
a module (it runs code), and package.json's "jest" key chooses reporters, setup files and
transforms. But one part of it is the tests' semantics, not plumbing: `fakeTimers`, and
`{enableGlobally: true}` above all, freezes the clock for every test. Tests written for it compare
a `new Date()` taken before a call with the time the call recorded (tough-cookie's cookie jar
tests); run without it they pass or fail by whether the clock ticked in between, which under load
it often does. Validation then counts such a test as failing before the fix and passing after it,
and an empty patch scores on it (0.75 in 2 of 3 scorings of tough-cookie `e45d44e9e8` at load 14).

So `fakeTimers` is read without running anything: from JSON (package.json "jest",
jest.config.json) or from the syntax tree of jest.config.{js,ts,mjs,cjs,mts,cts} (tree-sitter,
sandbox.grammars): the first `fakeTimers: {...}` property whose value is an
object literal. Only its documented keys with literal values are kept (true/false, numbers,
strings, arrays of strings); anything computed is left out, and so is the whole option when
nothing literal is left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tree_sitter import Node, Parser

from sandbox import grammars

MAX_CONFIG_BYTES = 256 * 1024
CONFIG_MODULES = tuple(f"jest.config.{ext}" for ext in ("ts", "js", "mjs", "cjs", "mts", "cts"))
# Jest 29's FakeTimersConfig: each key and the literal kinds it takes.
FAKE_TIMERS_KEYS: dict[str, tuple[type, ...]] = {
    "enableGlobally": (bool,),
    "legacyFakeTimers": (bool,),
    "advanceTimers": (bool, int, float),
    "doNotFake": (list,),
    "now": (int, float),
    "timerLimit": (int, float),
}
# What doNotFake may name (Jest's FakeableAPI); any other string drops the list.
FAKEABLE = frozenset(
    {
        "Date",
        "hrtime",
        "nextTick",
        "performance",
        "queueMicrotask",
        "requestAnimationFrame",
        "cancelAnimationFrame",
        "requestIdleCallback",
        "cancelIdleCallback",
        "setImmediate",
        "clearImmediate",
        "setInterval",
        "clearInterval",
        "setTimeout",
        "clearTimeout",
    }
)


def jest_fake_timers(project: Path) -> dict[str, Any] | None:
    """The project's Jest `fakeTimers` option, literal keys only; None when it sets none."""
    manifest = _read(project / "package.json")
    if manifest is not None:
        try:
            data = json.loads(manifest)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("jest"), dict):
            return _checked(data["jest"].get("fakeTimers"))
    text = _read(project / "jest.config.json")
    if text is not None:
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return _checked(data.get("fakeTimers")) if isinstance(data, dict) else None
    for name in CONFIG_MODULES:
        text = _read(project / name)
        if text is not None:
            return _checked(_module_option(name, text, "fakeTimers"))
    return None


def _read(path: Path) -> str | None:
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def _checked(value: object) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    kept: dict[str, Any] = {}
    for key, kinds in FAKE_TIMERS_KEYS.items():
        item = value.get(key)
        if item is None or not isinstance(item, kinds) or (isinstance(item, bool) and bool not in kinds):
            continue
        if isinstance(item, float) and not math.isfinite(item):
            continue
        if isinstance(item, list) and not all(isinstance(x, str) and x in FAKEABLE for x in item):
            continue
        kept[key] = item
    return kept or None


def _module_option(name: str, text: str, option: str) -> object:
    """The literal value of the first `option: ...` property in a config module; None if there is none."""
    grammar = grammars.TYPESCRIPT if name.endswith("ts") else grammars.JAVASCRIPT
    tree = Parser(grammars.language(grammar)).parse(text.encode("utf-8"))
    for node in _walk(tree.root_node):
        if node.type == "pair" and _key(node.child_by_field_name("key")) == option:
            value = node.child_by_field_name("value")
            return _literal(value) if value is not None and value.type == "object" else None
    return None


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _key(node: Node | None) -> str | None:
    if node is None:
        return None
    if node.type == "property_identifier":
        return _text(node)
    if node.type == "string":
        return "".join(_text(c) for c in node.named_children if c.type == "string_fragment")
    return None


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


_UNKNOWN = object()


def _literal(node: Node) -> Any:
    """A literal's value (object, array, string, number, true, false); _UNKNOWN for anything computed."""
    if node.type == "true":
        return True
    if node.type == "false":
        return False
    if node.type == "number":
        try:
            return int(_text(node).replace("_", ""), 0)
        except ValueError:
            try:
                return float(_text(node).replace("_", ""))
            except ValueError:
                return _UNKNOWN
    if node.type == "string":
        if any(c.type not in ("string_fragment",) for c in node.named_children):
            return _UNKNOWN  # an escape sequence: not worth decoding for an option
        return "".join(_text(c) for c in node.named_children)
    if node.type == "array":
        items = [_literal(c) for c in node.named_children if c.type != "comment"]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    if node.type == "object":
        found: dict[str, Any] = {}
        for pair in node.named_children:
            if pair.type != "pair":
                continue  # a spread, a method, a comment: not a literal key
            key, value = _key(pair.child_by_field_name("key")), pair.child_by_field_name("value")
            if key is not None and value is not None:
                item = _literal(value)
                if item is not _UNKNOWN:
                    found[key] = item
        return found
    return _UNKNOWN
