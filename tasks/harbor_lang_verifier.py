"""The verifier an exported Go or JavaScript Harbor task runs in its container (tests/crucible_lang_verify.py).

Standard library only, shipped beside tests/crucible_verify.py (tasks/harbor_verifier.py), whose
copying, verdict and reward files it uses: the reward is 1.0 only when every FAIL_TO_PASS and
PASS_TO_PASS test passed, as the runner reported it, in the runner's own ids (docs/languages.md).

    crucible_lang_verify.py install TESTS TASK_JSON       the base's runner files back, hidden tests in place
    crucible_lang_verify.py runs TASK_JSON                Go: "<package dir>\\t<-run argument>", one a package
    crucible_lang_verify.py reward LANG REPORT TASK_JSON OUT
                                                          read `go test -json`'s stream (go) or the Vitest/Jest
                                                          JSON summary (javascript), write reward.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path, PurePosixPath
from typing import Any

try:
    from tasks.harbor_verifier import (
        MAX_REPORT_BYTES,
        WORKSPACE,
        VerifyError,
        copy_into,
        load_metadata,
        read_small,
        real_dir,
        tests_dest,
        verdict,
        write_new,
    )
except ImportError:  # in the image: python3 -I puts no script folder on the path, so name the sibling
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from crucible_verify import (  # type: ignore[import-not-found,no-redef]
        MAX_REPORT_BYTES,
        WORKSPACE,
        VerifyError,
        copy_into,
        load_metadata,
        read_small,
        real_dir,
        tests_dest,
        verdict,
        write_new,
    )

# Where the image's Dockerfile installed the lock's packages (npm ci), outside the agent's workspace.
NODE_MODULES = Path("/opt/crucible/node/node_modules")
_RUNNER_FILE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_GO_DIR = re.compile(r"^\.(/[A-Za-z0-9_+~][A-Za-z0-9._+~-]{0,127})*$")
_GO_RUN = re.compile(r"^(-run=\^\([A-Za-z_][A-Za-z0-9_]*(\|[A-Za-z_][A-Za-z0-9_]*)*\)\$)?$")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def install(tests: Path, task: dict[str, Any], workspace: Path = WORKSPACE) -> int:
    """The base's runner files over the agent's (removed where the base has none), then the hidden tests."""
    for name in task.get("runner_files", []):
        if not isinstance(name, str) or not _RUNNER_FILE.match(name) or name in (".", ".."):
            raise VerifyError(f"runner file {str(name)[:80]!r} is not a file name")
        _remove(workspace / name)
        if (tests / "runner" / name).is_file():
            shutil.copyfile(tests / "runner" / name, workspace / name, follow_symlinks=False)
    if task.get("language") == "javascript":
        # A node_modules of the agent's, anywhere, would be where the tests' imports resolve first.
        for root, dirs, files in os.walk(workspace):  # links are listed, never followed
            for name in [n for n in (*dirs, *files) if n == "node_modules"]:
                _remove(Path(root) / name)
            dirs[:] = [d for d in dirs if d != "node_modules"]
        (workspace / "node_modules").symlink_to(NODE_MODULES)
    dest = workspace
    for part in tests_dest(task).parts:
        dest = real_dir(dest / part)
    return copy_into(tests / "hidden", dest)


def go_runs(task: dict[str, Any]) -> list[str]:
    """The `go test` runs export computed (package dir, -run argument), checked: nothing here is a shell word."""
    lines = []
    for entry in task.get("go_runs", []):
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(e, str) for e in entry)):
            raise VerifyError("go_runs must hold [package dir, -run argument] pairs")
        directory, run = entry
        if not _GO_DIR.match(directory) or ".." in directory.split("/") or not _GO_RUN.match(run):
            raise VerifyError(f"go run {directory[:80]!r} {run[:80]!r} is not a package dir and a test list")
        lines.append(f"{directory}\t{run}")
    if not lines:
        raise VerifyError("no go test runs listed")
    return lines


def go_outcomes(report: bytes) -> dict[str, bool]:
    """`<package>::<Test>` (and the package alone) -> passed, from go test -json's events; the worse end
    wins, and a package that failed with no failed test (it failed as a whole: a TestMain, a panic)
    has none of its passes believed (a test's output can print a pass line for itself in Go 1.19)."""
    seen: dict[str, bool] = {}
    packages: dict[str, set[str]] = {}
    for line in report.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # go test prints a build failure as a plain line
        if not isinstance(event, dict) or event.get("Action") not in ("pass", "fail", "skip"):
            continue
        package, test = event.get("Package"), event.get("Test")
        if not isinstance(package, str):
            continue
        key = f"{package}::{test}" if isinstance(test, str) and test else package
        packages.setdefault(package, set()).add(key)
        seen[key] = seen.get(key, True) and event["Action"] == "pass"
    for package, keys in packages.items():
        if seen.get(package) is False and all(seen[key] for key in keys if key != package):
            seen.update(dict.fromkeys(keys, False))
    return seen


def js_outcomes(report: bytes, workspace: Path = WORKSPACE) -> dict[str, bool]:
    """`<file>::<describe> > … > <test>` (and the file alone) -> passed, from the JSON summary that Vitest's
    json reporter and Jest's --json write alike; the worse wins for a repeated id."""
    summary = json.loads(report)
    results = summary.get("testResults") if isinstance(summary, dict) else None
    if not isinstance(results, list):
        raise VerifyError("the JSON summary has no testResults list")
    seen: dict[str, bool] = {}
    for result in results:
        name = result.get("name") if isinstance(result, dict) else None
        if not isinstance(name, str):
            continue
        file = PurePosixPath(name)
        file = file.relative_to(workspace) if file.is_relative_to(workspace) else file
        if file.is_absolute() or ".." in file.parts:
            continue  # not a file of the workspace: no listed id can name it
        seen[str(file)] = seen.get(str(file), True) and result.get("status") == "passed"
        for case in result.get("assertionResults") or []:
            if not isinstance(case, dict):
                continue
            titles = [*(case.get("ancestorTitles") or []), case.get("title", "")]
            key = f"{file}::{' > '.join(str(t) for t in titles)}"
            seen[key] = seen.get(key, True) and case.get("status") == "passed"
    return seen


READERS = {"go": go_outcomes, "javascript": js_outcomes}


def reward(language: str, report_path: Path, task_path: Path, out: Path) -> float:
    task = load_metadata(task_path)
    if language not in READERS or task.get("language") != language:
        raise VerifyError(f"language {language[:40]!r} is not this task's")
    try:
        report: bytes | None = read_small(report_path, MAX_REPORT_BYTES)
        problem = ""
    except VerifyError as exc:
        report, problem = None, str(exc)
    result = verdict(report, task, problem, read=READERS[language])
    write_new(out, json.dumps(result["rewards"]) + "\n")
    write_new(out.parent / "verdict.json", json.dumps(result, indent=2) + "\n")
    return float(result["rewards"]["reward"])


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["install"] and len(argv) == 3:
            print(f"installed {install(Path(argv[1]), load_metadata(Path(argv[2])))} files")
        elif argv[:1] == ["runs"] and len(argv) == 2:
            print("\n".join(go_runs(load_metadata(Path(argv[1])))))
        elif argv[:1] == ["reward"] and len(argv) == 5:
            print(f"reward {reward(argv[1], Path(argv[2]), Path(argv[3]), Path(argv[4]))}")
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (VerifyError, OSError, ValueError) as exc:
        print(f"crucible_lang_verify: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
