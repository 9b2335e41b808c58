"""A task as a Harbor task directory (docs/formats.md "Harbor task directories").

    <task_id>/instruction.md           the statement
    <task_id>/task.toml                Crucible's provenance, validation and timeouts
    <task_id>/environment/Dockerfile   the task's Python and its locked requirements
    <task_id>/environment/repo/        the repository snapshot, copied to /app
    <task_id>/environment/generated/   version modules a build backend would write (when any)
    <task_id>/solution/solve.sh        applies solution/expected.patch in /app
    <task_id>/tests/test.sh            copies tests/hidden/ into /app, runs pytest, writes
                                       /logs/verifier/reward.json (tests/crucible_verify.py)
    <task_id>/tests/crucible_task.json the tests the verifier checks, and the task's metadata.json,
                                       which `import_tasks --format harbor` reads back

The verifier is Crucible's reward in its plainest form: the FAIL_TO_PASS and PASS_TO_PASS
lists must all pass, read from a JUnit report written under /logs, never in the workspace.
What the hardened reward adds (a sealed harness, bytecode purged, plugins pinned, sentinel
checks) needs Crucible's sandbox and is not carried: docs/formats.md says which.

A Go or JavaScript task (metadata "language") gets its runner's environment instead: a Go image
and `go test -json` (no requirements, pytest.ini or conftests), or Node with the lock's packages
installed by `npm ci` at build time and Vitest (Jest when the base's package.json names jest and
not vitest) with a configuration of the verifier's own; tests/runner/ holds the base's runner
files (go.mod, package.json, the lock), put back before the run; tests/crucible_lang_verify.py
(tasks/harbor_lang_verifier.py) reads the runner's report (docs/languages.md).
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox.backends.base import SandboxError
from sandbox.distinfo import version_file_text
from sandbox.environments import EnvSpec, current_python
from sandbox.go_run import module_path
from sandbox.go_run import selection as go_selection
from sandbox.js_run import js_string
from sandbox.outcomes_js import JsRunner
from tasks.exports import TEXT, TaskExportError
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON, RUNNER_FILES, js_runner, language_of
from tasks.models import Task, TaskEnvironment
from tasks.services import TaskStoreError, task_environment_spec
from tasks.storage import iter_tree, tree_path

SCHEMA_VERSION = "1.1"
WORKDIR = "/app"
ORG_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
# Crucible counts an agent's budget in steps, Harbor in seconds: a step is given this long.
SECONDS_PER_STEP = 60
# What Harbor's Task strips from the start of an instruction (src/harbor/models/task/task.py).
CANARY_LINE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)
# The verifier's own work around the test run: copying the tests, reading the report.
VERIFIER_OVERHEAD_SECONDS = 60
PYTEST_PIN = "pytest==9.2.0"
# The newest pytest each older Python can install (pytest 9 needs 3.10, 8.4 needs 3.9).
OLDER_PYTEST = {(3, 9): "pytest==8.4.2", (3, 8): "pytest==8.3.5", (3, 7): "pytest==7.4.4"}
VERIFIER_SOURCE = Path(__file__).with_name("harbor_verifier.py")
LANG_VERIFIER_SOURCE = Path(__file__).with_name("harbor_lang_verifier.py")
# The Go Crucible validates with (Debian bookworm's), and a Node that runs Vitest 4 (20.19 or later).
GO_IMAGE = "golang:1.19-bookworm"
NODE_IMAGE = "node:20-bookworm-slim"
NODE_DIR = "/opt/crucible/node"  # tasks.harbor_lang_verifier.NODE_MODULES is its node_modules
APT_INSTALL = "apt-get update && apt-get install -y --no-install-recommends"

FilePiece = tuple[str, bytes, int]


def harbor_files(task: Task) -> Iterator[FilePiece]:
    """The task as a Harbor task directory: (path under the export root, content, mode)."""
    base, tests = tree_path(task.snapshot_hash), tree_path(task.tests_hash)
    if not base.is_dir() or not tests.is_dir():
        raise TaskExportError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    if language_of(task.metadata) != PYTHON:
        yield from language_harbor_files(task, base, tests)
        return
    try:
        spec = task_environment_spec(task)
    except TaskStoreError as exc:
        raise TaskExportError(str(exc)) from None
    root = task.task_id
    yield f"{root}/instruction.md", instruction(task.statement).encode(TEXT), 0o644
    yield f"{root}/task.toml", task_toml(task).encode(TEXT), 0o644
    yield f"{root}/environment/Dockerfile", dockerfile(task, spec).encode(TEXT), 0o644
    yield f"{root}/environment/requirements.txt", "\n".join(requirements(spec)).encode(TEXT) + b"\n", 0o644
    yield from _tree(f"{root}/environment/repo", base)
    yield from _version_files(f"{root}/environment/generated", base, spec)
    yield f"{root}/solution/solve.sh", SOLVE_SH.encode(TEXT), 0o755
    yield f"{root}/solution/expected.patch", task.expected_patch.encode(TEXT), 0o644
    yield f"{root}/tests/test.sh", test_sh(task).encode(TEXT), 0o755
    yield f"{root}/tests/crucible_verify.py", VERIFIER_SOURCE.read_bytes(), 0o644
    yield f"{root}/tests/crucible_task.json", _json(crucible_task(task)), 0o644
    yield f"{root}/tests/pytest.ini", pytest_ini(spec).encode(TEXT), 0o644
    yield from _tree(f"{root}/tests/hidden", tests)
    yield from _conftests(f"{root}/tests/conftests", base)
    yield f"{root}/tests/plugins/crucible_workspace_path.py", WORKSPACE_PATH_PLUGIN.encode(TEXT), 0o644


def instruction(statement: str) -> str:
    """The statement as instruction.md: Harbor drops leading lines that look like canary markers,
    so a statement that starts with one starts with a blank line here (the import takes it off)."""
    return "\n" + statement if starts_with_canary(statement) else statement


def starts_with_canary(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    return bool(CANARY_LINE.match(first))


def _tree(prefix: str, tree: Path) -> Iterator[FilePiece]:
    for rel, path in iter_tree(tree):
        # The executable bit is part of the tree's hash, so it must survive the trip.
        mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
        yield f"{prefix}/{rel}", path.read_bytes(), mode


def _conftests(prefix: str, base: Path) -> Iterator[FilePiece]:
    """The snapshot's conftest.py files: the verifier puts them back, and removes any other."""
    for rel, path in iter_tree(base):
        if rel.rsplit("/", 1)[-1] == "conftest.py":
            yield f"{prefix}/{rel}", path.read_bytes(), 0o644


def _version_files(prefix: str, base: Path, spec: EnvSpec | None) -> Iterator[FilePiece]:
    """The version modules Crucible's sandbox writes into each workspace: the image needs them too."""
    for path, version in spec.version_files if spec else ():
        if not (base / path).exists():
            yield f"{prefix}/{path}", version_file_text(path, version).encode(TEXT), 0o644


def _json(data: Any) -> bytes:
    return json.dumps(data, indent=2, ensure_ascii=False).encode(TEXT) + b"\n"


def crucible_task(task: Task) -> dict[str, Any]:
    """The lists scoring uses (validation's when the metadata gave none), and metadata.json as
    imported, byte for byte in meaning: importing the directory gives the same task version."""
    return {
        "task_id": task.task_id,
        "tests_dest": task.tests_dest,
        "fail_to_pass": list(task.fail_to_pass),
        "pass_to_pass": list(task.pass_to_pass),
        "metadata": task.metadata,
    }


# --- task.toml ----------------------------------------------------------------------------


def task_toml(task: Task) -> str:
    config: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    name = f"{task.suite.name}/{task.task_id}"
    if ORG_NAME.match(name) and ".." not in name:
        config["task"] = {"name": name, "description": _title(task.statement), "keywords": list(task.tags)}
    config["metadata"] = harbor_metadata(task)
    config["verifier"] = {"timeout_sec": float(task.timeout_seconds + VERIFIER_OVERHEAD_SECONDS)}
    config["agent"] = {"timeout_sec": float(task.max_steps * SECONDS_PER_STEP)}
    config["environment"] = {"build_timeout_sec": 600.0, "cpus": 1, "memory_mb": 2048, "allow_internet": False}
    text = toml_text(config)
    if tomllib.loads(text) != config:  # the writer below is small: never ship what it got wrong
        raise TaskExportError(f"task {task.task_id}: task.toml does not read back as written")
    return text


def _title(statement: str) -> str:
    first = next((line.strip("# ").strip() for line in statement.splitlines() if line.strip()), "")
    return first[:200]


def harbor_metadata(task: Task) -> dict[str, Any]:
    report = task.validation_report or {}
    strength = report.get("test_strength") or {}
    validation: dict[str, Any] = {
        "status": task.validation_status,
        "runs": int(report.get("runs") or 0),
        "test_seconds": float(report.get("test_seconds") or 0.0),
        "needs_review": bool(report.get("needs_review", False)),
        "reasons": [str(r) for r in report.get("reasons") or []],
        "flaky_tests": len(report.get("flaky") or []),
    }
    if isinstance(strength.get("score"), int | float):
        validation["test_strength"] = float(strength["score"])
        validation["brittle"] = bool(strength.get("brittle", False))
    crucible = {
        "task_id": task.task_id,
        "suite": task.suite.name,
        "version": task.version,
        "source": task.source,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "license": task.license,
        "test_command": task.test_command,
        "language": language_of(task.metadata),
        "max_steps": task.max_steps,
        "fail_to_pass": len(task.fail_to_pass),
        "pass_to_pass": len(task.pass_to_pass),
        "validation": validation,
    }
    return {"difficulty": task.difficulty or "unknown", "tags": list(task.tags), "crucible": crucible}


def toml_text(config: dict[str, Any]) -> str:
    """TOML for nested tables of strings, numbers, booleans and lists of them."""
    lines: list[str] = []
    _table(lines, [], config)
    return "\n".join(lines).strip() + "\n"


def _table(lines: list[str], path: list[str], table: dict[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    if path:
        lines += ["", f"[{'.'.join(_key(p) for p in path)}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in scalars.items()]
    for key, value in table.items():
        if isinstance(value, dict):
            _table(lines, [*path, key], value)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TaskExportError(f"task.toml cannot hold a {type(value).__name__}")


def _string(text: str) -> str:
    # JSON's escapes are TOML's, but for DEL, which TOML does not allow bare.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


# --- environment, solution, tests ---------------------------------------------------------


def requirements(spec: EnvSpec | None) -> list[str]:
    """The locked versions this deployment built the environment from, else the spec's own lines."""
    lines: list[str] = list(spec.requirements) if spec else []
    if spec is not None:
        row = TaskEnvironment.objects.filter(spec_hash=spec.spec_hash(), built=True).first()
        if row is not None and row.lock:
            lines = [str(pin) for pin in row.lock]
    if not any(re.match(r"pytest\s*(==|>=|~=|$)", line, re.IGNORECASE) for line in lines):
        lines.append(pytest_pin(spec.python if spec else current_python()))
    return lines


def pytest_pin(python: str) -> str:
    major, _, minor = python.partition(".")
    version = (int(major), int(minor.split(".")[0])) if major.isdigit() and minor[:1].isdigit() else (3, 99)
    return OLDER_PYTEST.get(version, PYTEST_PIN)


def dockerfile(task: Task, spec: EnvSpec | None) -> str:
    python = spec.python if spec else current_python()
    lines = [
        f"# Made by Crucible from task {task.task_id} ({task.version}).",
        f"FROM python:{python}-slim",
        "RUN apt-get update && apt-get install -y --no-install-recommends git patch && rm -rf /var/lib/apt/lists/*",
        "COPY requirements.txt /opt/crucible/requirements.txt",
        "RUN pip install --no-cache-dir -r /opt/crucible/requirements.txt",
        f"WORKDIR {WORKDIR}",
        f"COPY repo/ {WORKDIR}/",
    ]
    if spec and spec.version_files:
        # Kept apart from repo/ so that the snapshot stays the task's own tree.
        lines.append(f"COPY generated/ {WORKDIR}/")
    variables = dict(spec.variables) if spec else {}
    if spec and spec.pythonpath:
        variables["PYTHONPATH"] = ":".join(f"{WORKDIR}/{entry}" for entry in spec.pythonpath)
    lines += [f"ENV {name}={_docker_string(value)}" for name, value in sorted(variables.items())]
    return "\n".join(lines) + "\n"


def _docker_string(value: str) -> str:
    # Docker expands $NAME in ENV values; the task's value is meant literally.
    return json.dumps(value).replace("$", "\\$")


def pytest_ini(spec: EnvSpec | None) -> str:
    settings = spec.pytest if spec else None
    addopts = ["-rfExX", *(shlex.quote(a) for a in (settings.args if settings else ()))]
    text = "[pytest]\n# The verifier's own: the workspace's pytest configuration is not read.\n"
    text += f"junit_family = xunit1\naddopts = {' '.join(addopts)}\n"
    return text + (settings.ini_text() if settings else "")


def test_sh(task: Task) -> str:
    return TEST_SH.replace("@TIMEOUT@", str(int(task.timeout_seconds))).replace("@TASK@", task.task_id)


WORKSPACE_PATH_PLUGIN = f"""# Loaded with -p by tests/test.sh, which starts Python with PYTHONSAFEPATH: the workspace
# goes on sys.path only now, once pytest and its plugins are imported from the image.
import sys

sys.path.insert(0, "{WORKDIR}")
"""

SOLVE_SH = f"""#!/bin/bash
# The task's expected patch, applied in the workspace (Harbor's oracle agent runs this).
set -euo pipefail
cd {WORKDIR}
if command -v git >/dev/null && git apply --whitespace=nowarn /solution/expected.patch; then
  exit 0
fi
patch -p1 --forward --batch < /solution/expected.patch
"""

TEST_SH = f"""#!/bin/bash
# Crucible's verifier for task @TASK@: bytecode and conftest.py files the agent left are removed,
# the task's own conftest.py files and hidden tests go into the workspace over whatever is
# there, pytest runs the files of the FAIL_TO_PASS and PASS_TO_PASS tests with this folder's
# pytest.ini (never the workspace's), and its JUnit report, written under /logs, decides:
# reward 1.0 only when every one of those tests passed.
set -u
LOGS=/logs/verifier
mkdir -p "$LOGS"
# A reward file already there was not written by this run.
rm -f "$LOGS/reward.txt" "$LOGS/reward.json" "$LOGS/verdict.json" "$LOGS/junit.xml"
cd /
verify() {{ python3 -I /tests/crucible_verify.py "$@"; }}
# Tests that could not be put in place are not run: no report, reward 0.
if verify install /tests /tests/crucible_task.json && LISTED=$(verify files /tests/crucible_task.json); then
  mapfile -t FILES <<< "$LISTED"
  cd {WORKDIR}
  # Safe path: no module in the workspace shadows pytest; the plugin adds the workspace after.
  PYTHONSAFEPATH=1 PYTHONPATH="/tests/plugins${{PYTHONPATH:+:$PYTHONPATH}}" PYTHONDONTWRITEBYTECODE=1 \\
    timeout -k 5 @TIMEOUT@ python -m pytest -c /tests/pytest.ini -p crucible_workspace_path \\
    --rootdir {WORKDIR} -p no:cacheprovider --junitxml="$LOGS/junit.xml" "${{FILES[@]}}" > "$LOGS/pytest.log" 2>&1
  echo "pytest exited with $?"
  cd /
fi
verify reward "$LOGS/junit.xml" /tests/crucible_task.json "$LOGS/reward.json"
exit 0
"""


# --- Go and JavaScript tasks --------------------------------------------------------------


def language_harbor_files(task: Task, base: Path, tests: Path) -> Iterator[FilePiece]:
    """A Go or JavaScript task as a Harbor task directory: its runner's image, test.sh and report reader."""
    language = language_of(task.metadata)
    root = task.task_id
    try:
        runner = js_runner(base) if language == JAVASCRIPT else None
        runs = go_runs(task, base) if language == GO else []
    except SandboxError as exc:
        raise TaskExportError(f"task {task.task_id}: {exc}") from None
    yield f"{root}/instruction.md", instruction(task.statement).encode(TEXT), 0o644
    yield f"{root}/task.toml", task_toml(task).encode(TEXT), 0o644
    yield f"{root}/environment/Dockerfile", language_dockerfile(task, base).encode(TEXT), 0o644
    yield from _tree(f"{root}/environment/repo", base)
    yield f"{root}/solution/solve.sh", SOLVE_SH.encode(TEXT), 0o755
    yield f"{root}/solution/expected.patch", task.expected_patch.encode(TEXT), 0o644
    yield f"{root}/tests/test.sh", language_test_sh(task, base, runner).encode(TEXT), 0o755
    yield f"{root}/tests/crucible_verify.py", VERIFIER_SOURCE.read_bytes(), 0o644
    yield f"{root}/tests/crucible_lang_verify.py", LANG_VERIFIER_SOURCE.read_bytes(), 0o644
    described = {
        **crucible_task(task),
        "language": language,
        "runner_files": list(RUNNER_FILES[language]),
        **({"go_runs": [list(run) for run in runs]} if language == GO else {}),
    }
    yield f"{root}/tests/crucible_task.json", _json(described), 0o644
    yield from _tree(f"{root}/tests/hidden", tests)
    for name in RUNNER_FILES[language]:
        if (base / name).is_file() and not (base / name).is_symlink():
            yield f"{root}/tests/runner/{name}", (base / name).read_bytes(), 0o644
    if runner is JsRunner.JEST:
        yield f"{root}/tests/jest.config.json", jest_config(task, base).encode(TEXT), 0o644
    elif runner is JsRunner.VITEST:
        yield f"{root}/tests/vitest.config.mjs", vitest_config(task).encode(TEXT), 0o644


def go_runs(task: Task, base: Path) -> list[tuple[str, str]]:
    """(package dir, -run argument) of the listed tests, as Crucible's own Go runs choose them."""
    module, _ = module_path(base)
    return go_selection(base, module, [*task.fail_to_pass, *task.pass_to_pass])


def go_flags(base: Path) -> str:
    return "-mod=vendor" if (base / "vendor" / "modules.txt").is_file() else "-mod=mod"


def js_test_files(task: Task) -> list[str]:
    """The files of the listed tests (`<file>::...`), run whole: the reader counts only the listed tests."""
    files = dict.fromkeys(test.split("::", 1)[0] for test in (*task.fail_to_pass, *task.pass_to_pass))
    for name in files:
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or name.startswith("-") or "\\" in name:
            raise TaskExportError(f"task {task.task_id}: test id file {name[:200]!r} is not a path in the repository")
    return list(files)


def language_dockerfile(task: Task, base: Path) -> str:
    lines = [f"# Made by Crucible from task {task.task_id} ({task.version})."]
    if language_of(task.metadata) == GO:
        lines += [
            f"FROM {GO_IMAGE}",
            f"RUN {APT_INSTALL} python3 patch && rm -rf /var/lib/apt/lists/*",
            # As in Crucible's own Go runs: no module proxy, no toolchain download, the module's own vendor/.
            f"ENV GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS={go_flags(base)}",
            f"WORKDIR {WORKDIR}",
            f"COPY repo/ {WORKDIR}/",
        ]
    else:
        lock = [f"repo/{name}" for name in ("package.json", "package-lock.json") if (base / name).is_file()]
        lines += [
            f"FROM {NODE_IMAGE}",
            f"RUN {APT_INSTALL} python3 git patch && rm -rf /var/lib/apt/lists/*",
            # The lock's packages, installed once outside the workspace, without their install scripts.
            f"COPY {' '.join(lock)} {NODE_DIR}/",
            f"RUN cd {NODE_DIR} && npm ci --ignore-scripts --include=dev --no-audit --no-fund",
            f"WORKDIR {WORKDIR}",
            f"COPY repo/ {WORKDIR}/",
            f"RUN ln -s {NODE_DIR}/node_modules {WORKDIR}/node_modules",
            "ENV CI=true",
        ]
    return "\n".join(lines) + "\n"


def vitest_config(task: Task) -> str:
    """The verifier's Vitest configuration: the repository's vitest.config.* and vite.config.* are never read."""
    include = ", ".join(js_string(re.sub(r"([*?\[\]{}()!+@|,])", r"\\\1", f)) for f in js_test_files(task))
    return VITEST_CONFIG.replace("@INCLUDE@", include).replace("@ROOT@", js_string(WORKDIR))


def jest_config(task: Task, base: Path) -> str:
    """The verifier's Jest configuration: the repository's jest.config.* and babel configuration are never read."""
    lock = base / "package-lock.json"
    packages = json.loads(lock.read_text(encoding=TEXT)).get("packages", {}) if lock.is_file() else {}
    modules = f"{NODE_DIR}/node_modules"
    transform: dict[str, Any] = {}
    if "node_modules/babel-jest" in packages:
        presets: list[Any] = []
        if "node_modules/@babel/preset-env" in packages:
            presets = [[f"{modules}/@babel/preset-env", {"targets": {"node": "current"}}]]
        babel = {"configFile": False, "babelrc": False, "presets": presets}
        transform[r"\.[cm]?jsx?$"] = [f"{modules}/babel-jest", babel]
    config = {
        "rootDir": WORKDIR,
        "roots": [WORKDIR],
        "testRegex": ["^" + re.escape(f"{WORKDIR}/{f}") + "$" for f in js_test_files(task)],
        "transform": transform,
        "setupFiles": [],
        "setupFilesAfterEnv": [],
        "testEnvironment": "node",
        "cacheDirectory": "/tmp/crucible-jest",  # noqa: S108 - the image's, not Crucible's
        "watchman": False,
        "ci": True,
    }
    return json.dumps(config, indent=2) + "\n"


def language_test_sh(task: Task, base: Path, runner: JsRunner | None) -> str:
    if runner is None:
        script = GO_TEST_SH
    elif runner is JsRunner.JEST:
        script = JS_TEST_SH.replace("@RUN@", JEST_RUN)
    else:
        script = JS_TEST_SH.replace("@RUN@", VITEST_RUN)
    return (
        script.replace("@TIMEOUT@", str(int(task.timeout_seconds)))
        .replace("@TASK@", task.task_id)
        .replace("@GOFLAGS@", go_flags(base))
    )


VITEST_CONFIG = """// Crucible's verifier's own: nothing in the workspace is read for configuration.
export default {
  root: @ROOT@,
  cacheDir: "/tmp/crucible-vite",
  test: {
    include: [@INCLUDE@],
    exclude: [],
    reporters: ["default", "json"],
    outputFile: { json: "/logs/verifier/report.json" },
    watch: false,
    allowOnly: false,
    passWithNoTests: false,
    setupFiles: [],
    globalSetup: [],
    coverage: { enabled: false },
    typecheck: { enabled: false },
  },
};
"""

VITEST_RUN = (
    f"node {NODE_DIR}/node_modules/vitest/vitest.mjs run --config /tests/vitest.config.mjs"
    f" --configLoader native --root {WORKDIR}"
)
JEST_RUN = (
    f"node {NODE_DIR}/node_modules/jest/bin/jest.js --config /tests/jest.config.json --ci --forceExit"
    ' --json --outputFile "$LOGS/report.json"'
)

GO_TEST_SH = f"""#!/bin/bash
# Crucible's verifier for Go task @TASK@: the base's go.mod and go.sum go back over whatever the agent
# left, the hidden tests go into their package over the agent's, `go test -json` runs the FAIL_TO_PASS
# and PASS_TO_PASS tests of each package (no module proxy, a fresh build cache), and its event
# stream, written under /logs, decides: reward 1.0 only when every one of those tests passed.
set -u
LOGS=/logs/verifier
mkdir -p "$LOGS"
# A reward file already there was not written by this run.
rm -f "$LOGS/reward.txt" "$LOGS/reward.json" "$LOGS/verdict.json" "$LOGS/go-test.jsonl"
cd /
verify() {{ python3 -I /tests/crucible_lang_verify.py "$@"; }}
GOTMP=$(mktemp -d)
export GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOWORK=off GOENV=off CGO_ENABLED=0 \\
  GOFLAGS="@GOFLAGS@ -buildvcs=false" GOCACHE="$GOTMP/cache" GOPATH="$GOTMP/path" GOMODCACHE="$GOTMP/mod"
: > "$LOGS/go-test.jsonl"
# Tests that could not be put in place are not run: no events, reward 0.
if verify install /tests /tests/crucible_task.json && LISTED=$(verify runs /tests/crucible_task.json); then
  cd {WORKDIR}
  while IFS=$'\\t' read -r DIR RUN; do
    timeout -k 5 @TIMEOUT@ go test -json -count=1 ${{RUN:+"$RUN"}} "$DIR" \\
      >> "$LOGS/go-test.jsonl" 2>> "$LOGS/go-test.log"
    echo "go test $DIR exited with $?"
  done <<< "$LISTED"
  cd /
fi
verify reward go "$LOGS/go-test.jsonl" /tests/crucible_task.json "$LOGS/reward.json"
exit 0
"""

JS_TEST_SH = f"""#!/bin/bash
# Crucible's verifier for JavaScript task @TASK@: the base's package.json and lock go back over
# whatever the agent left, every node_modules of the agent's is removed and the image's (npm ci of the
# lock, outside the workspace) linked in its place, the hidden tests go in over the agent's, and the
# runner runs the files of the FAIL_TO_PASS and PASS_TO_PASS tests with this folder's configuration
# (never the workspace's); its JSON summary, written under /logs, decides: reward 1.0 only when every
# one of those tests passed.
set -u
LOGS=/logs/verifier
mkdir -p "$LOGS"
# A reward file already there was not written by this run.
rm -f "$LOGS/reward.txt" "$LOGS/reward.json" "$LOGS/verdict.json" "$LOGS/report.json"
cd /
verify() {{ python3 -I /tests/crucible_lang_verify.py "$@"; }}
export CI=true NODE_OPTIONS=--disable-wasm-trap-handler
if verify install /tests /tests/crucible_task.json; then
  cd {WORKDIR}
  timeout -k 5 @TIMEOUT@ @RUN@ > "$LOGS/runner.log" 2>&1
  echo "the test runner exited with $?"
  cd /
fi
verify reward javascript "$LOGS/report.json" /tests/crucible_task.json "$LOGS/reward.json"
exit 0
"""
