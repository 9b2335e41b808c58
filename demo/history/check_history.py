"""Check the histories that build_history.py makes.

Usage: python demo/history/check_history.py [--python PYTHON]

Builds everything twice into a temporary directory and compares the commit
hashes. Then, for every commit, runs the repository's whole test suite (it
must pass), and for every candidate commit (one with a parent that changes
both test and non-test files) checks out the parent, applies only the
commit's test changes and runs the changed test files, at least one of
which must fail; at the commit itself they must all pass. PYTHON (default:
this interpreter) runs ``python -m pytest``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_history import REPOS, git  # noqa: E402

BUILD_SCRIPT = Path(__file__).resolve().parent / "build_history.py"
RESULT_RE = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)")
PYTEST_TIMEOUT_S = 300


@dataclass
class RepoReport:
    name: str
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    candidates: int = 0


def is_test_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_") or name == "conftest.py"


def pytest_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    for key in ("DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        env.pop(key, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_pytest(python: str, repo: Path, paths: list[str]) -> tuple[int, dict[str, str], str]:
    """Exit code, {test id: outcome} and the output of one pytest run."""
    command = [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *paths]
    result = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, env=pytest_env(), timeout=PYTEST_TIMEOUT_S, check=False
    )
    outcomes = {}
    for line in result.stdout.splitlines():
        match = RESULT_RE.match(line)
        if match:
            outcomes[match.group(2)] = match.group(1)
    return result.returncode, outcomes, result.stdout + result.stderr


def checkout(repo: Path, ref: str) -> None:
    git(repo, "checkout", "--quiet", "--force", "--detach", ref)
    git(repo, "clean", "-fdxq")


def changed_files(repo: Path, sha: str) -> list[tuple[str, str]]:
    """(status letter, path) for each file the commit changes."""
    output = git(repo, "diff-tree", "-r", "--root", "--no-commit-id", "--no-renames", "--name-status", sha)
    return [(line[0], line.split("\t", 1)[1]) for line in output.splitlines()]


def commit_kind(has_parent: bool, touches_tests: bool, non_test_paths: list[str]) -> str:
    if not has_parent:
        return "initial"
    if touches_tests and non_test_paths:
        return "candidate"
    if touches_tests:
        return "tests-only"
    return "code-only" if any(path.endswith(".py") for path in non_test_paths) else "docs-only"


def check_repo(python: str, repo: Path) -> RepoReport:
    report = RepoReport(repo.name)
    for sha in git(repo, "rev-list", "--reverse", "main").splitlines():
        parents = git(repo, "rev-list", "--parents", "-n", "1", sha).split()[1:]
        subject = git(repo, "log", "-1", "--format=%s", sha)
        changes = changed_files(repo, sha)
        tests = [(status, path) for status, path in changes if is_test_path(path)]
        code = [path for _, path in changes if not is_test_path(path)]
        kind = commit_kind(bool(parents), bool(tests), code)
        label = f"{repo.name:<9} {sha[:7]} {kind:<10} {subject}"

        checkout(repo, sha)
        code_rc, outcomes, output = run_pytest(python, repo, [])
        passed = sum(outcome == "PASSED" for outcome in outcomes.values())
        if code_rc or not passed:
            report.problems.append(f"{label}: full suite fails\n{output}")
            report.lines.append(f"FAIL {label}")
            continue
        detail = f"suite {passed} passed"
        if kind == "candidate":
            test_paths = [path for status, path in tests if status != "D"]
            checkout(repo, parents[0])
            for status, path in tests:  # the commit's test changes, nothing else
                if status == "D":
                    git(repo, "rm", "--quiet", "--", path)
                else:
                    git(repo, "checkout", sha, "--", path)
            _, before, output_before = run_pytest(python, repo, test_paths)
            failing = sorted(test for test, outcome in before.items() if outcome in ("FAILED", "ERROR"))
            checkout(repo, sha)
            after_rc, after, output_after = run_pytest(python, repo, test_paths)
            all_pass = after_rc == 0 and bool(after) and all(outcome == "PASSED" for outcome in after.values())
            if not failing:
                report.problems.append(f"{label}: no changed test fails before the fix\n{output_before}")
            if not all_pass:
                report.problems.append(f"{label}: changed tests do not all pass at the commit\n{output_after}")
            if not failing or not all_pass:
                report.lines.append(f"FAIL {label}")
                continue
            report.candidates += 1
            names = ", ".join(test.split("::", 1)[1] for test in failing)
            detail += f"; {len(failing)} of {len(after)} tests in changed files fail before the fix ({names})"
        report.lines.append(f"ok   {label}  [{detail}]")
    git(repo, "checkout", "--quiet", "--force", "main")
    return report


def build(out_dir: Path) -> dict[str, list[str]]:
    """Run the build script in a fresh process; returns the commit hashes per repository."""
    subprocess.run([sys.executable, str(BUILD_SCRIPT), str(out_dir)], check=True, capture_output=True)
    return {name: git(out_dir / name, "rev-list", "main").splitlines() for name in REPOS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    args = parser.parse_args()
    probe = subprocess.run(
        [args.python, "-m", "pytest", "--version"], capture_output=True, env=pytest_env(), check=False
    )
    if probe.returncode:
        print(f"{args.python} cannot run pytest", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="crucible-history-") as tmp:
        first, second = build(Path(tmp) / "first"), build(Path(tmp) / "second")
        problems = [f"{name}: hashes differ between two builds" for name in REPOS if first[name] != second[name]]
        for name in REPOS:
            issues = [(Path(tmp) / run / f"{name}.issues.json").read_bytes() for run in ("first", "second")]
            if issues[0] != issues[1]:
                problems.append(f"{name}: issues.json differs between two builds")
        heads = ", ".join(f"{name} {hashes[0][:7]}" for name, hashes in first.items())
        print(f"{'FAIL' if problems else 'ok  '} reproducible: two builds give the same hashes (HEAD {heads})")

        # git() reads os.environ, never the per-thread state, so one repository per thread is safe.
        with ThreadPoolExecutor(max_workers=len(REPOS)) as pool:
            reports = list(pool.map(lambda name: check_repo(args.python, Path(tmp) / "first" / name), REPOS))
    for report in reports:
        print("\n".join(report.lines))
        problems += report.problems
    for problem in problems:
        print(f"\nPROBLEM: {problem}", file=sys.stderr)
    total = sum(report.candidates for report in reports)
    print(f"{total} candidate commits verified, {len(reports)} repositories" + (" -- FAILED" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
