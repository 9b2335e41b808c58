"""Paths in diffs: git's C-style quoting, the a/ b/ prefixes, and which paths are tests."""

from __future__ import annotations

from pathlib import PurePosixPath

from patches.model import PatchError

DEV_NULL = "/dev/null"
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_QUOTED = {value: f"\\{key}" for key, value in _ESCAPES.items()}


def needs_quotes(path: str, quote_non_ascii: bool = False) -> bool:
    return any(_must_escape(ch, quote_non_ascii) for ch in path)


def _must_escape(ch: str, quote_non_ascii: bool) -> bool:
    code = ord(ch)
    # Lone surrogates stand for bytes that were not UTF-8: they can only be written escaped.
    return ch in '"\\' or code < 0x20 or code == 0x7F or 0xDC80 <= code <= 0xDCFF or (quote_non_ascii and code > 0x7F)


def quote(path: str, quote_non_ascii: bool = False) -> str:
    """`path` as git writes it: bare, or in double quotes with C escapes when it must be."""
    if not needs_quotes(path, quote_non_ascii):
        return path
    out = ['"']
    for ch in path:
        if not _must_escape(ch, quote_non_ascii):
            out.append(ch)
            continue
        for byte in ch.encode("utf-8", "surrogateescape"):
            out.append(_QUOTED.get(byte) or f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def unquote(text: str) -> tuple[str, str]:
    """Read one C-quoted name from the start of `text`: (the name, the rest of the text)."""
    if not text.startswith('"'):
        raise PatchError(f"expected a quoted name at {text[:40]!r}")
    raw = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            name = raw.decode("utf-8", "surrogateescape")
            if "\x00" in name:
                raise PatchError(f"a path cannot contain a NUL byte: {text[: i + 1]!r}")
            return name, text[i + 1 :]
        if ch != "\\":
            raw += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        escape = text[i + 1 : i + 2]
        if escape in _ESCAPES:
            raw.append(_ESCAPES[escape])
            i += 2
        elif len(digits := text[i + 1 : i + 4]) == 3 and all(d in "01234567" for d in digits) and digits[0] in "0123":
            raw.append(int(digits, 8))
            i += 4
        else:
            raise PatchError(f"bad escape {text[i : i + 4]!r} in quoted name {text[:40]!r}")
    raise PatchError(f"unterminated quoted name {text[:40]!r}")


def strip_prefix(name: str, prefix: str) -> str:
    return name[len(prefix) :] if name.startswith(prefix) else name


def read_label(label: str, prefix: str) -> str | None:
    """A ---/+++ name: None for /dev/null; quotes and a trailing tab (and timestamp) removed."""
    if label.startswith('"'):
        name, _ = unquote(label)
    else:
        name = label.split("\t", 1)[0]
    if name == DEV_NULL:
        return None
    return strip_prefix(name, prefix)


def write_label(path: str | None, prefix: str, quote_non_ascii: bool = False) -> str:
    """What git prints after ---/+++: a tab follows a name with a space, for GNU patch's sake."""
    if path is None:
        return DEV_NULL
    tab = "\t" if " " in path else ""
    return quote(prefix + path, quote_non_ascii) + tab


def is_test_path(path: str, tests_dest: str) -> bool:
    """Whether a file is a test by its name, by being under the task's tests directory, or in a tests folder."""
    pure = PurePosixPath(path)
    name = pure.name
    dest = PurePosixPath(tests_dest)
    return (
        name.startswith("test_")
        and name.endswith(".py")
        or name.endswith("_test.py")
        or pure.is_relative_to(dest)
        or any(part in ("tests", "test", "testing") for part in pure.parts[:-1])
    )
