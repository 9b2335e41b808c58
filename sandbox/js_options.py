"""What a JavaScript repository's own Jest or Vitest configuration says about how its tests behave,
read as data.

The harness writes its own runner configuration and never loads the repository's: jest.config.*,
vitest.config.* and vite.config.* are modules (they run code), and package.json's "jest" key
chooses reporters, setup files and transforms. But a few options are the tests' semantics, not
plumbing, and tests written for them fail without them:

- Jest's `fakeTimers` (`{enableGlobally: true}` above all) freezes the clock for every test. Tests
  written for it compare a `new Date()` taken before a call with the time the call recorded
  (tough-cookie's cookie jar tests); run without it they pass or fail by whether the clock ticked
  in between, which under load it often does. Validation then counted such a test as failing
  before the fix and passing after it, and an empty patch scored on it (0.75 in 2 of 3 scorings of
  tough-cookie `e45d44e9e8` at load 14).
- Jest's `testEnvironment` and Vitest's `environment`: `jsdom` (or `happy-dom`) gives the tests a
  `document`; without it every DOM test fails with "document is not defined". A project that names
  none gets its Jest's default: `jsdom` for Jest 26 and older (by the lock's version), else `node`.
- Vitest's `globals: true`: `describe`, `it` and `expect` without an import; without it every
  such file fails to load.
- `testTimeout`: a test that honestly takes longer than the default 5 s.

They are read without running anything: from JSON (package.json "jest", jest.config.json) or from
the syntax tree of the config module (tree-sitter, sandbox.grammars): the first property of each
name. Only literal values are kept (true/false, numbers, strings, arrays of strings), and only
those each option documents: an environment by name from a short list (never a path, which would
load a workspace file), a timeout up to 10 minutes, fakeTimers' documented keys. Anything computed
is left out. Callers read them from the task's base, never from a patch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tree_sitter import Node, Parser

from sandbox import grammars

MAX_CONFIG_BYTES = 256 * 1024
CONFIG_MODULES = tuple(f"jest.config.{ext}" for ext in ("ts", "js", "mjs", "cjs", "mts", "cts"))
VITEST_CONFIGS = tuple(
    f"{stem}.config.{ext}" for stem in ("vitest", "vite") for ext in ("ts", "mts", "cts", "js", "mjs", "cjs")
)
# Environments by name only (each is a package of the lock's, or built in): never a path, which
# would load a file of the workspace's.
JEST_ENVIRONMENTS = frozenset({"node", "jsdom"})
VITEST_ENVIRONMENTS = frozenset({"node", "jsdom", "happy-dom", "edge-runtime"})
MAX_TEST_TIMEOUT_MS = 600_000
MAX_LOCK_BYTES = 16 * 1024 * 1024  # sandbox.node_env's bound on a lock it installs
# Jest 26 and older ran every test in jsdom unless a project said otherwise; Jest 27 made `node` the
# default. A project of that age that names no environment wrote its tests for jsdom's `document`.
LAST_JSDOM_DEFAULT_JEST = 26
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


def jest_options(project: Path) -> dict[str, Any]:
    """The Jest options the project's tests rely on, as data (_JEST_CHECKS; literal values only),
    with the test environment its locked Jest defaults to when it names none."""
    options = _kept(_jest_found(project), _JEST_CHECKS)
    if "testEnvironment" not in options and 0 < locked_major(project, "jest") <= LAST_JSDOM_DEFAULT_JEST:
        options["testEnvironment"] = "jsdom"
    return options


def locked_major(project: Path, package: str) -> int:
    """The major version of `package` in the project's package-lock.json (0: not there, or unreadable)."""
    lock = project / "package-lock.json"
    if lock.is_symlink() or not lock.is_file() or lock.stat().st_size > MAX_LOCK_BYTES:
        return 0
    try:
        data = json.loads(lock.read_bytes())
    except (ValueError, RecursionError):
        return 0
    packages = data.get("packages") if isinstance(data, dict) else None
    entry = packages.get(f"node_modules/{package}") if isinstance(packages, dict) else None
    version = entry.get("version") if isinstance(entry, dict) else None
    major = version.split(".", 1)[0] if isinstance(version, str) else ""
    return int(major) if major.isdigit() and len(major) < 6 else 0


def vitest_options(project: Path) -> dict[str, Any]:
    """The Vitest `test` options the project's tests rely on, as data (_VITEST_CHECKS; literal values
    only), from the first of vitest.config.* and vite.config.* (Vitest's own order)."""
    for name in VITEST_CONFIGS:
        text = _read(project / name)
        if text is not None:
            test = _module_options(name, text, ("test",)).get("test")
            return _kept(test, _VITEST_CHECKS) if isinstance(test, dict) else {}
    return {}


def _kept(found: dict[str, Any], checks: dict[str, Callable[[object], Any]]) -> dict[str, Any]:
    """Each option whose check keeps it (a check answers None for a value to leave out)."""
    return {key: value for key, check in checks.items() if (value := check(found.get(key))) is not None}


def _named(names: frozenset[str]) -> Callable[[object], str | None]:
    return lambda value: value if isinstance(value, str) and value in names else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _jest_found(project: Path) -> dict[str, Any]:
    """The literal values of _JEST_CHECKS' options where Jest reads its configuration: package.json's "jest" key,
    else jest.config.json, else the first jest.config module (read, never run)."""
    manifest = _read(project / "package.json")
    if manifest is not None:
        try:
            data = json.loads(manifest)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("jest"), dict):
            return data["jest"]
    text = _read(project / "jest.config.json")
    if text is not None:
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    for name in CONFIG_MODULES:
        text = _read(project / name)
        if text is not None:
            return _module_options(name, text, tuple(_JEST_CHECKS))
    return {}


def _timeout(value: object) -> int | None:
    """A per-test time limit in milliseconds, when it is a whole positive number within bounds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if 0 < value <= MAX_TEST_TIMEOUT_MS else None


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


def _module_options(name: str, text: str, options: tuple[str, ...]) -> dict[str, Any]:
    """The literal value of the first `option: ...` property of each option in a config module."""
    grammar = grammars.TYPESCRIPT if name.endswith("ts") else grammars.JAVASCRIPT
    tree = Parser(grammars.language(grammar)).parse(text.encode("utf-8"))
    found: dict[str, Any] = {}
    for node in _walk(tree.root_node):
        key = _key(node.child_by_field_name("key")) if node.type == "pair" else None
        if key in options and key not in found:
            value = node.child_by_field_name("value")
            found[key] = _literal(value) if value is not None else _UNKNOWN
    return {key: value for key, value in found.items() if value is not _UNKNOWN}


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


# The options that are the tests' semantics, not plumbing, each with the check that keeps its value:
# the clock, the global objects (a DOM or not), describe/it/expect as globals, how long a test may take.
_JEST_CHECKS: dict[str, Callable[[object], Any]] = {
    "fakeTimers": _checked,
    "testEnvironment": _named(JEST_ENVIRONMENTS),
    "testTimeout": _timeout,
}
_VITEST_CHECKS: dict[str, Callable[[object], Any]] = {
    "globals": _flag,
    "environment": _named(VITEST_ENVIRONMENTS),
    "testTimeout": _timeout,
}
