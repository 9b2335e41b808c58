"""How a sandboxed command's process is set up before it runs: its death signal, the parent
check, its cgroups and its resource limits.

Done by exec'd programs rather than a Python function between fork and exec: a `preexec_fn`
makes Python fork the whole interpreter and block in the child, which costs ~150 ms per
command in a worker holding a model (3 GB). Three ways, the first that works here:

1. `crucible-launch`, a 60-line C program built once from `launch/crucible-launch.c` with the
   system's C compiler (static, so its exec costs no dynamic loading): one exec, ~0.3 ms.
2. util-linux's `setpriv` (death signal) → `sh` (parent check, cgroups) → `prlimit` (limits):
   three execs, ~3 ms, for a host without a compiler.
3. None: the caller sets the process up in Python (`process._preexec`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sandbox.limits import Limits
from sandbox.runner_env import runner_root

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parent / "launch" / "crucible-launch.c"
# Run in the child after setpriv set its death signal: the parent may have died before that,
# which the signal would never report; then it joins the command's cgroups, before anything runs.
_JOIN = (
    '[ "$PPID" = "$1" ] || exit 137; shift; '
    'while [ "$1" != -- ]; do echo 0 > "$1" || { echo "crucible: cannot join cgroup $1" >&2; exit 126; }; shift; done; '
    'shift; exec "$@"'
)


def rlimits(limits: Limits) -> tuple[tuple[int, int, str], ...]:
    """(resource, value, prlimit's name) for every limit a command runs under."""
    mb = 1024 * 1024
    return (
        (resource.RLIMIT_CPU, limits.cpu_seconds, "cpu"),
        (resource.RLIMIT_AS, limits.memory_mb * mb, "as"),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb, "fsize"),
        (resource.RLIMIT_NOFILE, limits.open_files, "nofile"),
        (resource.RLIMIT_NPROC, limits.pids, "nproc"),
        (resource.RLIMIT_CORE, 0, "core"),
    )


def _works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _build(target: Path) -> bool:
    """Compile the helper to `target` (atomically: concurrent builders each rename a whole one)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".crucible-launch-", dir=target.parent)
    os.close(fd)
    try:
        for static in (["-static"], []):  # static where libc.a is installed, else dynamic
            built = subprocess.run(
                [compiler, "-O2", *static, "-o", staging, str(SOURCE)], capture_output=True, text=True, check=False
            )
            if built.returncode == 0:
                os.chmod(staging, 0o700)  # run by this user only, outside any sandbox
                os.replace(staging, target)
                return True
        logger.info("crucible-launch did not build: %s", built.stderr.strip()[-500:])
        return False
    finally:
        if os.path.exists(staging):
            os.unlink(staging)


@functools.cache
def helper() -> str | None:
    """The built `crucible-launch`, keyed by its source's hash; None when it cannot be built or run."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    target = runner_root() / f"crucible-launch-{digest}"
    if not target.exists() and not _build(target):
        return None
    if not _works([str(target), str(os.getpid()), "--rlimit=4:0", "--", "true"]):
        logger.warning("%s does not run here; commands are set up by setpriv and prlimit", target)
        return None
    return str(target)


@functools.cache
def util_linux() -> tuple[str, str, str] | None:
    """setpriv, sh and prlimit, when all are here and can do what launch_argv asks of them
    (setpriv --pdeathsig is util-linux 2.33, 2018); else None."""
    setpriv, sh, prlimit = shutil.which("setpriv"), shutil.which("sh"), shutil.which("prlimit")
    if not (setpriv and sh and prlimit):
        return None
    if not _works([setpriv, "--pdeathsig", "KILL", "--", prlimit, "--core=0", "--", sh, "-c", "exit 0"]):
        logger.warning("setpriv/prlimit cannot set a command up here; sandboxed commands are set up in Python")
        return None
    return setpriv, sh, prlimit


def launch_argv(argv: Sequence[str], limits: Limits, cgroup_procs: tuple[str, ...], parent: int) -> list[str] | None:
    """`argv` behind the program(s) that set up its process before it runs; None when neither
    way works here, and the caller must set the process up itself."""
    built = helper()
    if built is not None:
        return [
            built, str(parent), *(f"--cgroup={procs}" for procs in cgroup_procs),
            *(f"--rlimit={what}:{value}" for what, value, _ in rlimits(limits)), "--", *argv,
        ]  # fmt: skip
    tools = util_linux()
    if tools is None:
        return None
    setpriv, sh, prlimit = tools
    limited = [f"--{name}={value}" for _, value, name in rlimits(limits)]
    return [
        setpriv, "--pdeathsig", "KILL", "--", sh, "-c", _JOIN, "sh", str(parent), *cgroup_procs, "--",
        prlimit, *limited, "--", *argv,
    ]  # fmt: skip
