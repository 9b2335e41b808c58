"""Sandbox: a task's workspace plus the tools an agent and a verifier use on it."""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from sandbox import gitops, junit, quota, tools
from sandbox.backends.base import Backend, SandboxError
from sandbox.limits import Limits
from sandbox.names import DEFAULT_BACKEND, BackendName
from sandbox.results import ExecResult, TestReport

logger = logging.getLogger(__name__)

DEFAULT_TEST_COMMAND = "python -m pytest"
SUMMARY_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def sandboxes_root() -> Path:
    root = Path(os.environ.get("CRUCIBLE_SANDBOX_DIR") or tempfile.gettempdir()) / "crucible-sandboxes"
    root.mkdir(parents=True, exist_ok=True)
    return root


def reap_orphans() -> int:
    """Remove sandbox dirs whose owning process is gone (it was killed before closing them)."""
    removed = 0
    for entry in sandboxes_root().iterdir():
        owner = entry.name.split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
            continue
        except ProcessLookupError:
            logger.info("reaping sandbox dir %s: its owner pid %s is gone", entry, owner)
            _remove(str(entry))
            removed += 1
        except PermissionError:
            continue  # alive, someone else's
    return removed


def _remove(root: str) -> None:
    """Unmount a workspace quota (if any) and delete a sandbox's directory."""
    for mount in quota.mounts_under(Path(root)):
        quota.unmount(mount)
    shutil.rmtree(root, ignore_errors=True)
    if os.path.lexists(root):
        # Files the command made undeletable (chattr, a busy mount); the next reap tries again.
        logger.warning("could not fully remove sandbox dir %s", root)


def _bwrap(options: Mapping[str, object]) -> Backend:
    from sandbox.backends.bwrap import BwrapBackend

    return BwrapBackend()


def _docker(options: Mapping[str, object]) -> Backend:
    # Imported on use: the Docker SDK is a slow import that bwrap users never need.
    from sandbox.backends.docker import DockerBackend

    base_url, image = options.get("base_url"), options.get("image")
    return DockerBackend(base_url=str(base_url) if base_url else None, image=str(image) if image else None)


def _local(options: Mapping[str, object]) -> Backend:
    from sandbox.backends.local import LocalBackend

    return LocalBackend(allow_unsafe=bool(options.get("allow_unsafe")))


# One factory per backend name; a new backend registers here and nowhere else.
BACKENDS: dict[BackendName, Callable[[Mapping[str, object]], Backend]] = {
    BackendName.BWRAP: _bwrap,
    BackendName.DOCKER: _docker,
    BackendName.LOCAL: _local,
}


def make_backend(name: str, **options: object) -> Backend:
    """The backend called `name`; options a backend does not take are ignored (the CLI passes them all)."""
    try:
        factory = BACKENDS[BackendName(name)]
    except ValueError:
        raise SandboxError(f"unknown sandbox backend {name!r} ({', '.join(BACKENDS)})") from None
    return factory(options)


class Sandbox:
    """A fresh copy of `base` that commands run against, in a fresh sandbox each time.

    Every exec is its own isolated process tree, so nothing an agent starts survives
    to the next step; the workspace is the only state carried between steps.
    """

    def __init__(
        self,
        base: Path,
        backend: Backend | str = DEFAULT_BACKEND,
        limits: Limits | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        started = self._created = time.perf_counter()
        base = Path(base)
        if not base.is_dir():
            raise SandboxError(f"{base}: not a directory")
        reap_orphans()
        self.backend = make_backend(backend) if isinstance(backend, str) else backend
        self.limits = limits or Limits()
        self.env = dict(env or {})
        self.base = base.resolve()
        self.root = sandboxes_root() / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.root.mkdir()
        self.closed = False
        # A sandbox dropped without close() (an exception, a forgotten with) still
        # cleans up when collected or at interpreter exit.
        self._finalizer = weakref.finalize(self, _remove, str(self.root))
        self.workspace = self.root / "workspace"
        # True when the workspace size limit is exact (a capped tmpfs), False when
        # it is enforced by polling while commands run.
        self.workspace_quota = quota.can_mount() and quota.mount_tmpfs(self.workspace, self.limits.workspace_mb)
        try:
            shutil.copytree(self.base, self.workspace, symlinks=True, dirs_exist_ok=True)
        except shutil.Error as exc:
            self.close()
            raise SandboxError(f"{base}: could not copy into the workspace: {str(exc)[:300]}") from None
        self.git_dir = self.root / "git"
        self._baseline = False
        self.prepare_ms = round((time.perf_counter() - started) * 1000, 3)
        self.startup_ms: float | None = None  # of the first command, for provenance
        logger.debug(
            "sandbox %s: ready on %s in %.0f ms (exact workspace quota: %s)",
            self.root.name,
            self.backend.name,
            self.prepare_ms,
            self.workspace_quota,
        )

    # lifecycle -------------------------------------------------------------
    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._finalizer()
            self.backend.close()
            logger.debug("sandbox %s: closed after %.1f s", self.root.name, time.perf_counter() - self._created)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError("this sandbox is closed")

    # execution -------------------------------------------------------------
    def exec(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run a shell command line (str) or an argv (list) in a fresh sandbox over the workspace."""
        self._check_open()
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise SandboxError("empty command")
        result = self.backend.run(
            argv, self.workspace, self.limits.with_timeout(timeout), {**self.env, **(env or {})}, stdin=stdin
        )
        if self.startup_ms is None:
            self.startup_ms = result.startup_ms
        return result

    # file tools --------------------------------------------------------------
    def read_file(self, path: str) -> str:
        self._check_open()
        text, truncated = tools.read_file(self.workspace, path)
        return text + ("\n[... file truncated ...]" if truncated else "")

    def write_file(self, path: str, content: str) -> str:
        self._check_open()
        size = tools.write_file(self.workspace, path, content)
        return f"wrote {size} bytes to {path}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        self._check_open()
        return tools.edit_file(self.workspace, path, old, new)

    def apply_patch(self, patch: str, fuzzy: bool = False) -> str:
        self._check_open()
        self._ensure_baseline()
        return gitops.apply(self.git_dir, self.workspace, patch, fuzzy)

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> list[tools.Match]:
        self._check_open()
        return tools.search(self.workspace, pattern, path, regex)

    def search_symbol(self, name: str) -> list[tools.Match]:
        self._check_open()
        return tools.search_symbol(self.workspace, name)

    def diff(self) -> str:
        self._check_open()
        self._ensure_baseline()
        return gitops.diff(self.git_dir, self.workspace)

    def _ensure_baseline(self) -> None:
        if not self._baseline:
            gitops.init_baseline(self.git_dir, self.base)
            self._baseline = True

    # tests -------------------------------------------------------------------
    def run_tests(
        self, args: Sequence[str] = (), command: str = DEFAULT_TEST_COMMAND, timeout: float | None = None
    ) -> TestReport:
        """Run pytest with a JUnit report outside the workspace, at a path chosen per run."""
        self._check_open()
        reports = self.root / "reports" / secrets.token_hex(8)
        reports.mkdir(parents=True)
        reports.chmod(0o777)  # a backend may run the command as an unprivileged user
        local = self.backend.name == BackendName.LOCAL
        inside = str(reports) if local else f"/run/{secrets.token_hex(16)}"
        argv = [
            *shlex.split(command),
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={inside}/report.xml",
            *args,
        ]
        result = self.backend.run(
            argv,
            self.workspace,
            self.limits.with_timeout(timeout),
            self.env,
            extra_rw_binds=() if local else ((reports, inside),),
        )
        if self.startup_ms is None:
            self.startup_ms = result.startup_ms
        report = TestReport(exec=result)
        try:
            report.tests, report.collected = junit.parse(reports / "report.xml")
        except junit.ReportError as exc:
            report.inconsistencies.append(str(exc))
        finally:
            shutil.rmtree(reports, ignore_errors=True)
        report.inconsistencies += _cross_check(report)
        return report


def _cross_check(report: TestReport) -> list[str]:
    """Exit code, the report and pytest's own summary line must tell the same story."""
    problems: list[str] = []
    result = report.exec
    if result.timed_out:
        problems.append("the test run timed out")
    if not report.tests and report.collected == 0 and result.exit_code not in (5, None):
        if not problems and not report.inconsistencies:
            problems.append(f"no tests were reported but pytest exited with {result.exit_code}")
    outcomes = [t.outcome for t in report.tests.values()]
    bad = sum(o in ("failed", "error") for o in outcomes)
    if report.tests and report.collected != len(report.tests):
        problems.append(f"the report claims {report.collected} tests but lists {len(report.tests)}")
    if result.exit_code == 0 and bad:
        problems.append(f"pytest exited 0 but the report has {bad} failing tests")
    if result.exit_code == 1 and report.tests and not bad:
        problems.append("pytest exited 1 but the report has no failing test")
    if result.exit_code == 5 and report.tests:
        problems.append("pytest said no tests ran but the report lists some")
    summary = _summary_counts(result.stdout)
    if summary is not None and report.tests:
        passed = sum(o == "passed" for o in outcomes)
        if summary.get("passed", 0) != passed:
            problems.append(f"pytest's summary says {summary.get('passed', 0)} passed, the report {passed}")
    return problems


def _summary_counts(stdout: str) -> dict[str, int] | None:
    lines = [line for line in stdout.strip().splitlines() if " in " in line and SUMMARY_RE.search(line)]
    if not lines:
        return None
    counts: dict[str, int] = {}
    for number, word in SUMMARY_RE.findall(lines[-1]):
        counts["error" if word.startswith("error") else word] = int(number)
    return counts
