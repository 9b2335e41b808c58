"""What a Go or JavaScript patch does to its test runner's inputs: runner configuration, module
resolution, vendored or installed code, and the paths the hidden tests go to.

None of these reaches the run: admission sets new test files aside, the hidden files go in last,
`go.mod` / `package.json` / the lock are put back from the base, and the harness's runner reads
none of the repository's configuration (tasks.lang_tests). The flag says the patch tried, for a
person; the code itself is scanned by rewards.anticheat.lang_scan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from patches import FilePatch
from patches.model import LineKind
from rewards.anticheat.files import read_bounded
from rewards.anticheat.flags import Flag
from rewards.anticheat.lang_scan import CONFIG, GO, JAVASCRIPT
from rewards.anticheat.patterns import MAX_SOURCE_BYTES

# Runner configuration a JavaScript repository could carry: the harness's run never reads it.
JS_CONFIG = re.compile(
    r"^(vitest|vite|jest|vitest\.workspace|vitest\.setup|jest\.setup|babel\.config|vitest\.projects)(\.[\w-]+)*\.(js|mjs|cjs|ts|mts|cts|json)$"
    r"|^\.babelrc(\.\w+)?$|^\.swcrc$|^\.mocharc(\.\w+)?$|^\.npmrc$|^\.yarnrc(\.yml)?$|^\.pnpmfile\.cjs$|^bunfig\.toml$"
)
TSCONFIG = re.compile(r"^(tsconfig|jsconfig)([.\w-]*)\.json$")
TSCONFIG_KEYS = re.compile(r"\"(paths|baseUrl|rootDirs|include|exclude|files|types|typeRoots|references|extends)\"")
# package.json keys that configure the test runner, or how the repository's own modules resolve.
PACKAGE_TEST_KEYS = (
    "jest",
    "vitest",
    "mocha",
    "ava",
    "c8",
    "nyc",
    "imports",
    "exports",
    "type",
    "browser",
    "workspaces",
)
GO_MOD_DIRECTIVES = re.compile(r"^\s*(replace|toolchain|retract|godebug)\b|^\s*go\s+\d")


def _changed_lines(patch: FilePatch) -> Iterator[str]:
    """The lines a patch adds or removes: a directive taken away changes the build as one added does."""
    for hunk in patch.hunks:
        for line in hunk.lines:
            if line.kind in (LineKind.ADDED, LineKind.REMOVED):
                yield line.text


def _json_object(data: bytes | None) -> dict[str, object] | None:
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _package_json_changes(before: dict[str, object] | None, after: dict[str, object] | None) -> list[str]:
    """The test-configuration keys of package.json a patch changed (scripts' test entries included)."""
    if after is None:
        return ["package.json (no longer a JSON object)"] if before is not None else []
    before = before or {}
    changed = [k for k in PACKAGE_TEST_KEYS if before.get(k) != after.get(k)]
    old, new = before.get("scripts"), after.get("scripts")
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    changed += [f"scripts.{k}" for k in sorted(set(old) | set(new)) if "test" in k and old.get(k) != new.get(k)]
    return changed


def scan_runner_config(
    patches: Iterable[FilePatch], workspace: Path, base: Path, language: str, hidden: Iterable[str]
) -> list[Flag]:
    """Flags for what a patch did to the runner's inputs or the hidden tests' paths (kept or set aside).

    Call it on the patched workspace before the runner files are put back from the base.
    """
    flags = []
    hidden_paths = set(hidden)
    for patch in patches:
        for rel in patch.paths:
            pure = PurePosixPath(rel)
            name = pure.name
            why = None
            if rel in hidden_paths:
                why = "writes where a hidden test goes (the hidden test replaces it)"
            elif "node_modules" in pure.parts:
                why = "node_modules: installed code, never the patch's"
            elif language == GO and "vendor" in pure.parts:
                why = "vendored modules (vendor/modules.txt switches the build to them)"
            elif language == GO and name in ("go.work", "go.work.sum"):
                why = "a Go workspace file (which modules build)"
            elif language == GO and name == "go.mod":
                directives = sorted(
                    {m.group(1) or "go" for line in _changed_lines(patch) if (m := GO_MOD_DIRECTIVES.match(line))}
                )
                if directives:
                    why = f"go.mod directives that choose what builds: {', '.join(directives)}"
            elif language == JAVASCRIPT and JS_CONFIG.match(name):
                why = "test runner, transform or package manager configuration"
            elif language == JAVASCRIPT and TSCONFIG.match(name):
                keys = sorted({m.group(1) for line in _changed_lines(patch) for m in TSCONFIG_KEYS.finditer(line)})
                if keys:
                    why = f"tsconfig settings that decide which files and paths resolve: {', '.join(keys)}"
            elif language == JAVASCRIPT and name == "package.json":
                after = _json_object(read_bounded(workspace, rel, MAX_SOURCE_BYTES)) if patch.new_path else None
                keys = _package_json_changes(_json_object(read_bounded(base, rel, MAX_SOURCE_BYTES)), after)
                if keys:
                    why = f"package.json keys that configure the test run or module resolution: {', '.join(keys[:8])}"
            if why is not None:
                flags.append(Flag(CONFIG, f"changes {rel[:200]}: {why}", rel[:200]))
                break
    return flags
