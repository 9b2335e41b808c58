"""Running a Harbor task directory's own scripts in Crucible's sandbox, and reading its reward safely.

Harbor runs a task in its image: the repository at the Dockerfile's WORKDIR, solution/ at
/solution (its oracle agent runs solve.sh), then tests/ at /tests and tests/test.sh, which
writes /logs/verifier/reward.txt or reward.json. Here each script is one sandboxed command
(bwrap by default: no network, no host files but the runner's) with those paths mapped over a
fresh workspace, and the runner's Python stands in for the image's.

The Go or Node a FROM golang:* or node:* image names is stood in for by the same version
installed here (tasks.harbor_toolchains), first on PATH.

The workspace is a given folder (a Crucible export's environment/repo), or what the task's
Dockerfile makes of its build context when it stays within a small subset: FROM python:*,
ubuntu:* or debian:* (the sandbox's own system stands in for the base: bash, coreutils, the
runner's Python, nothing a package manager would add), WORKDIR (or task.toml's
[environment] workdir, which Harbor lets override it), COPY/ADD of build-context files into
the WORKDIR, ENV, and RUN, each RUN itself a sandboxed command in the workspace (so one that
needs the network fails). Anything else is refused with the line that says it.

The reward file is written by code the task and the agent control: it is read as a regular
file (no link, FIFO or device), at most a few KiB, and must be a number (reward.txt) or an
object of names to numbers (reward.json), as Harbor's verifier reads them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import stat
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sandbox import ExecResult, Limits, Sandbox
from sandbox.backends.base import Backend
from sandbox.backends.bwrap import BwrapBackend
from tasks.harbor_toolchains import StandIn, ToolchainImageError, stand_in
from tasks.trees import TreeError, check_tree, exists_at, open_dir, open_regular, walk

MAX_REWARD_BYTES = 64 * 1024
MAX_REWARD_KEYS = 100
MAX_DOCKERFILE_BYTES = 256 * 1024
MAX_CONFIG_BYTES = 1 << 20
# However long a task.toml asks for, one script here runs at most this long.
MAX_SCRIPT_SECONDS = 3600.0
# Bases the sandbox's own Debian-like system stands in for (no image is pulled or built).
BASE_IMAGES = r"^(python:[0-9][0-9.]*(-[a-z0-9.-]+)?|ubuntu:[a-z0-9.]+|debian:[a-z0-9.-]+)$"
IGNORED_INSTRUCTIONS = frozenset({"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "MAINTAINER", "HEALTHCHECK", "STOPSIGNAL"})


class HarborRunError(ValueError):
    """A task directory this runner cannot stand in for Harbor on, or a reward it cannot believe."""


@dataclass
class HarborRun:
    rewards: dict[str, float]
    solve_exit: int | None = None
    test_exit: int | None = None
    output: dict[str, str] = field(default_factory=dict)

    @property
    def reward(self) -> float:
        return self.rewards.get("reward", 0.0)


@dataclass
class Image:
    """What a Dockerfile of the supported subset makes: a workspace and its variables."""

    workdir: str = "/app"
    variables: dict[str, str] = field(default_factory=dict)
    base: str = ""  # FROM's image: its Go or Node is stood in for (tasks.harbor_toolchains)
    steps: list[tuple[str, str]] = field(default_factory=list)  # (COPY|RUN, argument)


def run_harbor_task(
    task: Path,
    *,
    solve: bool,
    base: Path | None = None,
    backend: Backend | None = None,
    limits: Limits | None = None,
) -> HarborRun:
    """solve.sh (when asked) then test.sh, each in a fresh sandbox over one workspace; the reward read back."""
    task = Path(os.path.abspath(task))  # the sandbox binds it by absolute path
    try:
        check_tree(task)
    except TreeError as exc:
        raise HarborRunError(f"{task}: {exc}") from None
    if base is None:
        image = read_dockerfile(task)
    else:
        read = read_dockerfile(task, lenient=True)
        image = Image(workdir=read.workdir, base=read.base)
    image.workdir = configured_workdir(task) or image.workdir
    toolchain = _toolchain(task, image)
    backend = backend or BwrapBackend()
    limits = limits or Limits()
    agent_seconds, verifier_seconds = timeouts(task, limits.wall_seconds)
    with tempfile.TemporaryDirectory(prefix="crucible-harbor-run-") as tmp:
        start = base if base is not None else Path(tmp) / "empty"
        start.mkdir(exist_ok=True)
        logs = Path(tmp) / "logs"
        fresh_logs(logs)
        env = {**image.variables, **toolchain.variables(backend.runtime.path)}
        with Sandbox(start, backend, limits=limits, env=env) as box:
            run = HarborRun(rewards={})
            if base is None:
                _build(box, task, image)
            if solve:
                solution = [(task / "solution", "/solution"), *toolchain.binds]
                done = _script(box, image, "/solution/solve.sh", solution, [], agent_seconds)
                run.solve_exit, run.output["solve"] = done.exit_code, done.stdout + done.stderr
            verifier = [(task / "tests", "/tests"), *toolchain.binds]
            done = _script(box, image, "/tests/test.sh", verifier, [(logs, "/logs")], verifier_seconds)
            run.test_exit, run.output["test"] = done.exit_code, done.stdout + done.stderr
        run.rewards = read_reward(logs)
        return run


def build_and_solve(
    task: Path, snapshot: Path, *, backend: Backend | None = None, limits: Limits | None = None
) -> tuple[Image, str, ExecResult]:
    """The workspace the task's Dockerfile makes, written to the new folder `snapshot`, and the
    diff its solution/solve.sh makes of it (the patch that solves the task, as Crucible keeps one)."""
    task = Path(os.path.abspath(task))  # the sandbox binds it by absolute path
    try:
        check_tree(task)
    except TreeError as exc:
        raise HarborRunError(f"{task}: {exc}") from None
    image = read_dockerfile(task)
    image.workdir = configured_workdir(task) or image.workdir
    backend = backend or BwrapBackend()
    limits = limits or Limits()
    agent_seconds, _ = timeouts(task, limits.wall_seconds)
    with tempfile.TemporaryDirectory(prefix="crucible-harbor-build-") as tmp:
        (Path(tmp) / "empty").mkdir()
        with Sandbox(Path(tmp) / "empty", backend, limits=limits, env=image.variables) as box:
            _build(box, task, image)
            shutil.copytree(box.workspace, snapshot, symlinks=True)
    with Sandbox(snapshot, backend, limits=limits, env=image.variables) as box:
        done = _script(box, image, "/solution/solve.sh", [(task / "solution", "/solution")], [], agent_seconds)
        return image, box.diff(), done


def _toolchain(task: Path, image: Image) -> StandIn:
    try:
        return stand_in(image.base)
    except ToolchainImageError as exc:
        raise HarborRunError(f"{task}/environment/Dockerfile: {exc}") from None


def fresh_logs(logs: Path) -> None:
    """/logs as Harbor mounts it: verifier/, agent/ and artifacts/ there before a script runs."""
    for name in ("verifier", "agent", "artifacts"):
        (logs / name).mkdir(parents=True)


def task_config(task: Path) -> dict[str, object]:
    try:
        return tomllib.loads(_read_small(task, "task.toml", MAX_CONFIG_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise HarborRunError(f"{task}: task.toml is missing") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HarborRunError(f"{task}: task.toml is not valid TOML ({exc})") from None


def configured_workdir(task: Path) -> str | None:
    """task.toml's [environment] workdir (Harbor's override of the Dockerfile's WORKDIR), checked."""
    table = task_config(task).get("environment", {})
    value = table.get("workdir") if isinstance(table, dict) else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise HarborRunError(f"{task}: task.toml [environment] workdir must be a string")
    return _workdir(value, f"{task}/task.toml [environment] workdir")


def timeouts(task: Path, default: float) -> tuple[float, float]:
    """task.toml's [agent] and [verifier] timeout_sec, at most MAX_SCRIPT_SECONDS; `default` where unset."""
    config = task_config(task)
    found = []
    for section in ("agent", "verifier"):
        table = config.get(section, {})
        value = table.get("timeout_sec") if isinstance(table, dict) else None
        seconds = default if value is None else _number(value, f"task.toml [{section}] timeout_sec")
        if seconds <= 0:
            raise HarborRunError(f"{task}: task.toml [{section}] timeout_sec must be positive")
        found.append(min(seconds, MAX_SCRIPT_SECONDS))
    return found[0], found[1]


def _script(
    box: Sandbox,
    image: Image,
    script: str,
    ro: list[tuple[Path, str]],
    rw: list[tuple[Path, str]],
    seconds: float,
) -> ExecResult:
    command = f"cd {shlex.quote(image.workdir)} && exec bash {script}"
    return box.backend.run(
        ["bash", "-c", command],
        box.workspace,
        box.limits.with_timeout(seconds),
        box.env,
        extra_ro_binds=ro,
        extra_rw_binds=[(box.workspace, image.workdir), *rw],
    )


# --- the Dockerfile subset ----------------------------------------------------------------


def read_dockerfile(task: Path, lenient: bool = False) -> Image:
    """The image a Dockerfile of the supported subset describes; `lenient` reads only its WORKDIR."""
    try:
        text = _read_small(task / "environment", "Dockerfile", MAX_DOCKERFILE_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        if lenient:
            return Image()
        raise HarborRunError(f"{task}: environment/Dockerfile is missing (only a Dockerfile is stood in for)") from None
    image = Image()
    seen_workdir = False
    for number, line in _instructions(text):
        word, _, argument = line.partition(" ")
        word, argument = word.upper(), argument.strip()
        where = f"{task}/environment/Dockerfile line {number}"
        if word == "FROM":
            # The last FROM is the image the scripts run in; `--platform=...` is not its name.
            image.base = next((w for w in argument.split() if not w.startswith("--")), "")
        if word == "WORKDIR":
            if seen_workdir and argument != image.workdir:
                raise HarborRunError(f"{where}: a second WORKDIR is not supported")
            image.workdir, seen_workdir = _workdir(argument, where), True
        elif lenient or word in IGNORED_INSTRUCTIONS:
            continue
        elif word == "FROM":
            if not re.match(BASE_IMAGES, argument):
                raise HarborRunError(
                    f"{where}: FROM {argument[:80]}: only python:X.Y, ubuntu:* and debian:* images can be stood in for"
                )
        elif word == "ENV":
            image.variables.update(_env(argument, where))
        elif word in ("COPY", "ADD"):
            image.steps.append(("COPY", argument))
        elif word == "RUN":
            image.steps.append(("RUN", argument))
        else:
            raise HarborRunError(f"{where}: {word} is not supported by Crucible's stand-in for Harbor's image")
    return image


def _instructions(text: str) -> list[tuple[int, str]]:
    out, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        start = start or number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending, start = "", 0
    if pending:
        out.append((start, pending))
    return out


def _workdir(argument: str, where: str) -> str:
    path = PurePosixPath(argument)
    if not path.is_absolute() or ".." in path.parts or "$" in argument or len(path.parts) < 2:
        raise HarborRunError(f"{where}: WORKDIR must be a plain absolute path below / (got {argument[:80]!r})")
    if path.parts[1] in ("tmp", "proc", "dev", "usr", "etc", "logs", "tests", "solution", "bin", "lib"):
        raise HarborRunError(f"{where}: WORKDIR {argument} would hide a path the sandbox needs")
    return str(path)


def _env(argument: str, where: str) -> dict[str, str]:
    try:
        words = shlex.split(argument)
    except ValueError as exc:
        raise HarborRunError(f"{where}: ENV {exc}") from None
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    pairs = dict(word.split("=", 1) for word in words if "=" in word)
    for name in pairs:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in ("PATH", "HOME") or name.startswith("LD_"):
            raise HarborRunError(f"{where}: ENV {name[:40]} is not a variable the task may set")
    return pairs


def _build(box: Sandbox, task: Path, image: Image) -> None:
    context = task / "environment"
    for kind, argument in image.steps:
        if kind == "COPY":
            _copy(box, context, image, argument)
            continue
        done = box.backend.run(
            ["bash", "-c", f"cd {shlex.quote(image.workdir)} && {argument}"],
            box.workspace,
            box.limits,
            box.env,
            extra_rw_binds=[(box.workspace, image.workdir)],
        )
        if done.exit_code != 0:
            tail = (done.stdout + done.stderr)[-500:]
            raise HarborRunError(f"{task}: Dockerfile RUN {argument[:80]} failed in the sandbox (no network): {tail}")


def _copy(box: Sandbox, context: Path, image: Image, argument: str) -> None:
    words = shlex.split(argument)
    if len(words) < 2 or any(w.startswith("--") for w in words) or argument.lstrip().startswith("["):
        raise HarborRunError(f"{context}/Dockerfile: COPY {argument[:80]}: only `COPY SRC... DEST` is supported")
    *sources, dest = words
    target = PurePosixPath(dest if dest.startswith("/") else f"{image.workdir}/{dest}")
    inside = PurePosixPath(image.workdir)
    if ".." in target.parts or not (target == inside or inside in target.parents):
        raise HarborRunError(f"{context}/Dockerfile: COPY to {dest}: only into the WORKDIR {image.workdir}")
    where = box.workspace.joinpath(*target.relative_to(inside).parts)
    for source in sources:
        rel = PurePosixPath(source)
        if rel.is_absolute() or ".." in rel.parts or any(c in source for c in "*?["):
            raise HarborRunError(f"{context}/Dockerfile: COPY {source}: a plain path in the build context")
        _copy_path(context, rel, where, many=len(sources) > 1 or dest.endswith("/"))


def _copy_path(context: Path, rel: PurePosixPath, where: Path, many: bool) -> None:
    source = context.joinpath(*rel.parts) if rel.parts and rel != PurePosixPath(".") else context
    if source.is_dir() and not source.is_symlink():
        for entry in walk(source, prefix=""):
            _write(where / entry.rel, entry.fd, entry.info.st_mode)
        return
    parent_fd = open_dir(source.parent)
    try:
        fd, info = open_regular(source.name, parent_fd, str(rel))
    finally:
        os.close(parent_fd)
    try:
        _write(where / source.name if many or where.is_dir() else where, fd, info.st_mode)
    finally:
        os.close(fd)


def _write(target: Path, fd: int, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.is_file():
        target.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(target, flags, 0o755 if mode & stat.S_IXUSR else 0o644), "wb") as sink:
        shutil.copyfileobj(os.fdopen(fd, "rb", closefd=False), sink, 1 << 20)


# --- the reward ---------------------------------------------------------------------------


REWARD_FILES = ("reward.txt", "reward.json")


def read_reward(logs: Path, names: tuple[str, ...] = REWARD_FILES) -> dict[str, float]:
    """reward.txt (Harbor reads it first) or reward.json under logs/verifier, checked; {} if neither.

    `names`: the reward files to read, in order (a script verifier reads only the one its
    test.sh writes)."""
    verifier = logs / "verifier"
    if not verifier.exists():
        return {}
    for name in names:
        try:
            data = _read_small(verifier, name, MAX_REWARD_BYTES)
        except FileNotFoundError:
            continue
        return _reward_txt(data) if name == "reward.txt" else _reward_json(data)
    return {}


def _read_small(folder: Path, name: str, limit: int) -> bytes:
    try:
        dir_fd = open_dir(folder)
    except TreeError as exc:
        raise HarborRunError(str(exc)) from None
    try:
        if not exists_at(dir_fd, name):
            raise FileNotFoundError(name)
        fd, info = open_regular(name, dir_fd, f"{folder}/{name}")
    except TreeError as exc:
        raise HarborRunError(str(exc)) from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if info.st_size > limit or len(data) > limit:
        raise HarborRunError(f"{folder}/{name}: larger than {limit} bytes")
    return data


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HarborRunError(f"{what}: must be a finite number")
    return float(value)


def _reward_txt(data: bytes) -> dict[str, float]:
    text = data.decode("ascii", "replace").strip()
    try:
        value = float(text)
    except ValueError:
        raise HarborRunError(f"reward.txt: {text[:40]!r} is not a number") from None
    return {"reward": _number(value, "reward.txt")}


def _reward_json(data: bytes) -> dict[str, float]:
    try:
        parsed = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise HarborRunError("reward.json: not JSON") from None
    if not isinstance(parsed, dict) or not parsed or len(parsed) > MAX_REWARD_KEYS:
        raise HarborRunError(f"reward.json: must be an object of 1 to {MAX_REWARD_KEYS} names to numbers")
    return {str(k)[:100]: _number(v, f"reward.json {str(k)[:40]}") for k, v in parsed.items()}
