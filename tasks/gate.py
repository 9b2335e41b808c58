"""One gate per repository before any task: its suite, run once on the newest commit.

A repository whose environment cannot be built, whose suite does not collect, or whose tests
mostly fail would otherwise give a build report with the same failure once per candidate
("no JUnit report was written" fifteen times) and no valid task. The gate builds the
environment the newest commit needs, runs the whole suite there once (collection errors in
some files do not stop the others), and either lets the build go on or stops it with one
repository-level diagnosis: what failed, the commonest errors, and what would fix it.
`build_tasks --skip-gate` builds anyway.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandbox import Limits, Sandbox, SandboxError
from sandbox.backends.base import Backend
from sandbox.environments import EnvBuildError
from sandbox.results import Outcome, TestReport
from tasks.builders.common import export_tree
from tasks.builders.environment import detect_environment
from tasks.builders.statements import SANDBOX_PATH
from tasks.environments import prepare_environment

# Below this share of passing tests among those that ran (collection errors counted as failures),
# the suite "mostly fails" at its newest commit: no task built from its history can be trusted.
MIN_PASS_SHARE = 0.5
GATE_TIMEOUT_S = 900
TOP_ERRORS = 5
ERROR_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Failed|Interrupt)\b:?")
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
MISSING_FIXTURE = re.compile(r"fixture '(\w+)' not found")
# Plugins that provide the fixtures suites most often use without listing the plugin.
FIXTURE_PLUGINS = {
    "mocker": "pytest-mock",
    "benchmark": "pytest-benchmark",
    "httpx_mock": "pytest-httpx",
    "requests_mock": "requests-mock",
    "freezer": "pytest-freezer",
    "event_loop": "pytest-asyncio",
}


@dataclass
class GateReport:
    passed: bool
    commit: str
    reason: str = ""
    outcomes: dict[str, int] = field(default_factory=dict)
    pass_share: float = 0.0
    errors: list[tuple[str, int]] = field(default_factory=list)  # (first line of an error, how many)
    hints: list[str] = field(default_factory=list)
    environment: str = ""
    seconds: float = 0.0
    skipped: bool = False  # overridden with --skip-gate

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The diagnosis, as the command prints it and the suite page shows it."""
        if self.skipped:
            return "repository gate skipped (--skip-gate)"
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items()))
        head = f"repository gate at {self.commit[:10]}: {'passed' if self.passed else 'failed'}"
        lines = [f"{head} ({counts or 'no tests ran'}; {self.pass_share:.0%} passed; {self.seconds:.1f} s)"]
        if self.reason:
            lines.append(f"  why: {self.reason}")
        lines += [f"  {n}x {error}" for error, n in self.errors]
        lines += [f"  fix: {hint}" for hint in self.hints]
        return "\n".join(lines)


def run_gate(
    repo: Path,
    commit: str,
    *,
    backend: Backend | str,
    test_command: str,
    pytest: str = "",
    variables: Sequence[tuple[str, str]] = (),
    use_environment: bool = True,
    repo_name: str = "",
    min_pass_share: float = MIN_PASS_SHARE,
) -> GateReport:
    """The gate for `repo` at `commit` (its files, without history), in the environment they need."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crucible-gate-") as tmp:
        snapshot = Path(tmp) / "repo"
        export_tree(repo, commit, snapshot)
        try:
            spec = detect_environment(snapshot, pytest, variables).spec if use_environment else None
        except EnvBuildError as exc:
            return GateReport(False, commit, f"no environment can be named for it: {exc}")
        environment = None
        if spec is not None:
            prepared = prepare_environment(spec, repo_name)
            if prepared.environment is None:
                return GateReport(
                    False, commit, f"the environment cannot be built: {prepared.error[:500]}",
                    environment=spec.spec_hash(), seconds=round(time.monotonic() - started, 1),
                    hints=["manage.py build_env --repo DIR shows pip's log; --pytest SPEC picks another runner, "
                           "--env none runs on the bare runner", "--skip-gate builds tasks anyway"],
                )  # fmt: skip
            environment = prepared.environment
        try:
            with Sandbox(snapshot, backend, limits=Limits(wall_seconds=GATE_TIMEOUT_S), environment=environment) as box:
                report = box.run_tests(("--continue-on-collection-errors",), command=test_command)
        except SandboxError as exc:
            return GateReport(False, commit, f"the suite could not be run: {exc}")
    gate = judge(report, commit, min_pass_share)
    gate.environment = spec.spec_hash() if spec is not None else "bare runner"
    gate.seconds = round(time.monotonic() - started, 1)
    return gate


def judge(report: TestReport, commit: str, min_pass_share: float = MIN_PASS_SHARE) -> GateReport:
    outcomes = Counter(t.outcome for t in report.tests.values())
    ran = sum(outcomes.values()) - outcomes.get(Outcome.SKIPPED, 0)
    share = outcomes.get(Outcome.PASSED, 0) / ran if ran else 0.0
    failing = [t for t in report.tests.values() if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED, Outcome.XFAILED)]
    errors = Counter(_headline(t.message) or t.outcome for t in failing).most_common(TOP_ERRORS)
    gate = GateReport(True, commit, outcomes=dict(outcomes), pass_share=round(share, 3), errors=errors)
    if report.exec.timed_out:
        gate.passed, gate.reason = False, f"the suite did not finish within {GATE_TIMEOUT_S} s"
    elif not report.valid and not report.tests:
        detail = "; ".join(report.inconsistencies)[:300] or report.exec.stderr[-300:]
        gate.passed, gate.reason = False, f"pytest gave no usable report ({detail})"
    elif not ran:
        gate.passed, gate.reason = False, "no test was collected"
    elif share < min_pass_share:
        gate.passed, gate.reason = False, f"only {share:.0%} of the tests pass (at least {min_pass_share:.0%} needed)"
    if not gate.passed:
        gate.hints = hints(failing, report)
    return gate


def hints(failing: list[Any], report: TestReport) -> list[str]:
    """What would most likely fix the commonest failures."""
    found: list[str] = []
    messages = [t.message for t in failing] + [report.exec.stderr]
    modules = Counter(m.group(1).split(".")[0] for text in messages for m in MISSING_MODULE.finditer(text or ""))
    for module, count in modules.most_common(3):
        found.append(f"{count} failure(s) import '{module}', which the environment lacks: list it in the "
                     "repository's test extras or dependency group, or build with --pytest / --env")  # fmt: skip
    fixtures = Counter(m.group(1) for text in messages for m in MISSING_FIXTURE.finditer(text or ""))
    for fixture, count in fixtures.most_common(3):
        plugin = FIXTURE_PLUGINS.get(fixture, "the pytest plugin that provides it")
        found.append(f"{count} test(s) use the fixture '{fixture}': the environment needs {plugin}")
    if report.collection_errors:
        shown = ", ".join(report.collection_errors[:3])
        found.append(f"{len(report.collection_errors)} file(s) cannot be collected ({shown}): if they are "
                     "fixtures or data, the repository's norecursedirs/testpaths keep them out")  # fmt: skip
    if not found and not report.tests:
        found.append("pytest did not run: check the environment's runner (--pytest 'pytest>=8')")
    found.append("--skip-gate builds tasks anyway")
    return found


def _headline(message: str) -> str:
    """What an error says, alike for every test it hit: its last `...Error: ...` line (a collection
    error's first line names the file), paths of the run left out; else its first line."""
    lines = [line.strip().removeprefix("E").strip() for line in (message or "").splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.match(line)]
    return SANDBOX_PATH.sub("…", (errors or lines or [""])[-1 if errors else 0])[:200]
