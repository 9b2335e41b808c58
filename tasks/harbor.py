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
from pathlib import Path
from typing import Any

from sandbox.distinfo import version_file_text
from sandbox.environments import EnvSpec, current_python
from tasks.exports import TEXT, TaskExportError
from tasks.lang_tests import PYTHON, language_of
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
# The Go Crucible validates with (Debian bookworm's), and a Node that runs Vitest 4 (20.19 or later).

FilePiece = tuple[str, bytes, int]


def harbor_files(task: Task) -> Iterator[FilePiece]:
    """The task as a Harbor task directory: (path under the export root, content, mode)."""
    base, tests = tree_path(task.snapshot_hash), tree_path(task.tests_hash)
    if not base.is_dir() or not tests.is_dir():
        raise TaskExportError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    if language_of(task.metadata) != PYTHON:
        from tasks.harbor_lang import language_harbor_files  # the Go/JS layout reuses this module's pieces

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
    yield from tree_files(f"{root}/environment/repo", base)
    yield from _version_files(f"{root}/environment/generated", base, spec)
    yield f"{root}/solution/solve.sh", SOLVE_SH.encode(TEXT), 0o755
    yield f"{root}/solution/expected.patch", task.expected_patch.encode(TEXT), 0o644
    yield f"{root}/tests/test.sh", test_sh(task).encode(TEXT), 0o755
    yield f"{root}/tests/crucible_verify.py", VERIFIER_SOURCE.read_bytes(), 0o644
    yield f"{root}/tests/crucible_task.json", json_bytes(crucible_task(task)), 0o644
    yield f"{root}/tests/pytest.ini", pytest_ini(spec).encode(TEXT), 0o644
    yield from tree_files(f"{root}/tests/hidden", tests)
    yield from _conftests(f"{root}/tests/conftests", base)
    yield f"{root}/tests/plugins/crucible_workspace_path.py", WORKSPACE_PATH_PLUGIN.encode(TEXT), 0o644


def instruction(statement: str) -> str:
    """The statement as instruction.md: Harbor drops leading lines that look like canary markers,
    so a statement that starts with one starts with a blank line here (the import takes it off)."""
    return "\n" + statement if starts_with_canary(statement) else statement


def starts_with_canary(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    return bool(CANARY_LINE.match(first))


def tree_files(prefix: str, tree: Path) -> Iterator[FilePiece]:
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


def json_bytes(data: Any) -> bytes:
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
