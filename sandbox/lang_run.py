"""What a Go or JavaScript test run shares: its private directories, the read-only harness and report
mounts, one sandboxed command, and the report it comes back as (the pytest path's TestReport).

The runner's reports come back through FIFOs (sandbox.report_fifo), never as files the run could
rewrite; its configuration is a harness directory mounted read-only at an unpredictable path
outside the workspace; the workspace is the only thing the run can write besides its private /tmp.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.backends.base import WORKSPACE_MOUNT, Backend, SandboxError
from sandbox.core import sandboxes_root
from sandbox.junit import MAX_REPORT_BYTES
from sandbox.limits import Limits
from sandbox.names import BackendName
from sandbox.private import private_dir
from sandbox.report_fifo import FifoData, ReportFifos
from sandbox.results import ExecResult, TestOutcome, TestReport

logger = logging.getLogger(__name__)

MAX_IDS = 5000
MAX_ID_CHARS = 2000
MAX_STDERR_SHOWN = 800


@dataclass
class RunPlan:
    """One sandboxed runner command: its argv and environment, what it reads and where it reports."""

    argv: list[str]
    env: dict[str, str]
    reports: tuple[str, ...]  # FIFO names in the reports directory
    # Those a runner opens read-write (sandbox.report_fifo): the sandbox can read them too.
    readable: tuple[str, ...] = ()
    harness: dict[str, str] = field(default_factory=dict)  # file name -> text, mounted read-only
    ro_binds: list[tuple[Path, str]] = field(default_factory=list)


@dataclass(frozen=True)
class RunDirs:
    """Where the harness and the reports are, as the sandbox sees them (fresh, unpredictable paths)."""

    harness: str
    reports: str

    @classmethod
    def fresh(cls) -> RunDirs:
        return cls(harness=f"/run/{secrets.token_hex(16)}", reports=f"/run/{secrets.token_hex(16)}")

    def report(self, name: str) -> str:
        return f"{self.reports}/{name}"


def check_backend(backend: Backend) -> None:
    """Only bwrap mounts the harness, the reports and the dependencies where a run needs them."""
    if backend.name != BackendName.BWRAP:
        raise SandboxError(
            f"Go and JavaScript test runs need the bwrap backend (got {backend.name}): "
            "they mount a read-only harness, report FIFOs and the dependencies into the sandbox"
        )


def checked_ids(test_ids: Sequence[str]) -> list[str]:
    """The ids, bounded and printable; anything else is refused before a word of it reaches a runner."""
    if len(test_ids) > MAX_IDS:
        raise SandboxError(f"{len(test_ids)} test ids: at most {MAX_IDS} in one run")
    for test_id in test_ids:
        if not isinstance(test_id, str) or not test_id or len(test_id) > MAX_ID_CHARS or not test_id.isprintable():
            raise SandboxError(
                f"test id {str(test_id)[:80]!r}: not a printable id of at most {MAX_ID_CHARS} characters"
            )
    return list(dict.fromkeys(test_ids))


def run_plan(
    plan: RunPlan, dirs: RunDirs, workspace: Path, backend: Backend, limits: Limits, root: Path | None = None
) -> tuple[ExecResult, dict[str, FifoData]]:
    """Run the plan's command over `workspace` with its harness and report FIFOs mounted; its reports' bytes."""
    check_backend(backend)
    run_dir = private_dir(root or sandboxes_root(), f"{os.getpid()}-run-{secrets.token_hex(12)}")
    try:
        harness, reports = run_dir / "harness", private_dir(run_dir, "reports")
        harness.mkdir(mode=0o755)
        for name, text in plan.harness.items():
            (harness / name).write_text(text)
            (harness / name).chmod(0o644)
        mount_points = _mount_points(workspace, plan.ro_binds)
        fifos = ReportFifos(reports, plan.reports, MAX_REPORT_BYTES, plan.readable)
        try:
            result = backend.run(
                plan.argv,
                workspace,
                limits,
                plan.env,
                # Both read-only: the FIFOs are written through a read-only mount (see sandbox.report_fifo).
                extra_ro_binds=[(harness, dirs.harness), (reports, dirs.reports), *plan.ro_binds],
            )
        finally:
            data = fifos.finish()
            _remove_mount_points(mount_points)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return result, data


def _mount_points(workspace: Path, binds: Sequence[tuple[Path, str]]) -> list[Path]:
    """The directories bwrap will make in the workspace for binds inside it, so they can go afterwards."""
    made = []
    for _, inside in binds:
        if inside.startswith(WORKSPACE_MOUNT + "/"):
            host = workspace / inside.removeprefix(WORKSPACE_MOUNT + "/")
            if not os.path.lexists(host):
                made.append(host)
    return made


def _remove_mount_points(paths: Sequence[Path]) -> None:
    for path in paths:
        try:
            path.rmdir()
        except OSError:
            logger.warning("could not remove the mount point %s the run left in its workspace", path)


def lang_report(
    result: ExecResult, tests: dict[str, TestOutcome], problems: Sequence[str], unsafe: str = ""
) -> TestReport:
    """The run as the pytest path reports one: its outcomes, and every reason not to believe them."""
    report = TestReport(exec=result, tests=tests, collected=len(tests), unsafe=unsafe)
    if result.timed_out:
        report.inconsistencies.append("the test run timed out")
    report.inconsistencies += problems
    if not tests and result.stderr.strip():
        report.inconsistencies.append(f"the runner's stderr ends: {result.stderr.strip()[-MAX_STDERR_SHOWN:]}")
    return report
