"""Per-repository environments: the dependencies a repository's tests need, installed once, read-only.

A task names its environment (`EnvSpec`: the Python it needs, the requirements from its
`pyproject.toml` / `setup.cfg` / `setup.py` / `requirements*.txt` and test extras, the test
runner, the import paths of a `src/` layout). `ensure_environment` installs it from the package
registry into a venv of its own, keyed by its lock (the exact versions pip resolved), and every
task of that repository at that lock shares it: mounted read-only by bwrap, or baked into an
image for the docker backend. Commands in the sandbox then run the environment's `python`
without any network, and without Crucible's site-packages: only the environment's packages
and the repository's own code are importable.

Building is the one step that talks to the registry, on the host. What gets installed comes
from task metadata, which an imported task directory controls, so a spec is checked like any
hostile input: requirements are plain PEP 508 names and versions from the index (no URLs,
paths or pip options), and only wheels are installed, so no package's build script ever runs
on the host (`allow_sdist` lifts that for an administrator building by hand).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from sandbox.distinfo import MAX_VERSION_FILES, Project, ProjectError, check_version_file
from sandbox.pytest_settings import PytestSettings, PytestSettingsError
from sandbox.runner_env import EMPTY_DIR, runner_root

logger = logging.getLogger(__name__)

ROOT_ENV = "CRUCIBLE_ENV_DIR"
MANIFEST = "crucible-env.json"
FORMAT = 1  # bump when the layout changes: new keys, new environments
MAX_REQUIREMENTS = 200
MAX_REQUIREMENT_CHARS = 200
MAX_PYTHONPATH = 8
MAX_VARIABLES = 32
MAX_VARIABLE_CHARS = 1000
# What the sandbox and the hermetic harness decide, never a task: where programs and imports come
# from, which plugins load, where the report goes.
RESERVED_VARIABLES = frozenset({"PATH", "HOME", "LANG", "SHELL", "TMPDIR", "BASH_ENV", "ENV", "IFS"})
RESERVED_VARIABLE_PREFIXES = ("PYTHON", "PYTEST", "LD_", "CRUCIBLE", "PIP_", "VIRTUAL_ENV", "COV_CORE")
_VARIABLE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
BUILD_TIMEOUT_S = 900
LOG_TAIL_CHARS = 20_000
_NAME = re.compile(r"[-_.]+")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_KEY = re.compile(r"^[0-9a-f]{16}$")


class EnvBuildError(RuntimeError):
    """An environment spec was refused or could not be built; the message says which and why."""


def current_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def normalise(name: str) -> str:
    return _NAME.sub("-", name).lower()


@dataclass(frozen=True)
class EnvSpec:
    """What a repository's tests need; its hash finds the environment built for it."""

    requirements: tuple[str, ...]
    python: str = field(default_factory=current_python)
    pythonpath: tuple[str, ...] = ()
    # Set-up the tests need besides packages: environment variables for every command of the task
    # (DJANGO_SETTINGS_MODULE, TZ...). Never the ones the sandbox and the harness own.
    variables: tuple[tuple[str, str], ...] = ()
    # The repository's own pytest settings, read as data at build time (sandbox.pytest_settings):
    # the harness writes them into its ini, since the workspace's config is never read.
    pytest: PytestSettings = field(default_factory=PytestSettings)
    # The repository's own name, version and entry points (sandbox.distinfo), for the metadata
    # its code reads about itself; None when it declares none or never reads it.
    project: Project | None = None
    # (path, version) of each version module the build backend would generate (hatch-vcs,
    # setuptools-scm): never in git, so written into each workspace copy instead (Sandbox).
    version_files: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_spec(self)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "python": self.python,
            "requirements": list(self.requirements),
            "pythonpath": list(self.pythonpath),
        }
        if self.variables:
            data["variables"] = dict(self.variables)
        if self.pytest:
            data["pytest"] = self.pytest.to_json()
        if self.project is not None:
            data["project"] = self.project.to_json()
        if self.version_files:
            data["version_files"] = [list(pair) for pair in self.version_files]
        return data

    @classmethod
    def from_json(cls, data: object) -> EnvSpec:
        """From task metadata: anything malformed is refused with a message naming the field."""
        if not isinstance(data, dict):
            raise EnvBuildError("environment: must be an object with python, requirements and pythonpath")
        unknown = set(data) - {
            "python",
            "requirements",
            "pythonpath",
            "variables",
            "pytest",
            "project",
            "version_files",
            "key",
        }
        if unknown:
            raise EnvBuildError(f"environment: unknown field(s) {sorted(unknown)}")
        variables = data.get("variables", {})
        if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
            raise EnvBuildError("environment.variables: must be an object of NAME: string")
        requirements, pythonpath = data.get("requirements", []), data.get("pythonpath", [])
        python = data.get("python", current_python())
        for name, value in (("requirements", requirements), ("pythonpath", pythonpath)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise EnvBuildError(f"environment.{name}: must be a list of strings")
        if not isinstance(python, str):
            raise EnvBuildError("environment.python: must be a string such as '3.11'")
        try:
            pytest = PytestSettings.from_json(data["pytest"]) if "pytest" in data else PytestSettings()
            project = Project.from_json(data["project"]) if data.get("project") is not None else None
        except (PytestSettingsError, ProjectError) as exc:
            raise EnvBuildError(str(exc)) from None
        return cls(
            requirements=tuple(requirements),
            python=python,
            pythonpath=tuple(pythonpath),
            variables=tuple(sorted(variables.items())),
            pytest=pytest,
            project=project,
            version_files=_version_files(data.get("version_files", [])),
        )

    def spec_hash(self) -> str:
        text = json.dumps([FORMAT, self.python, sorted(self.requirements)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version_files(data: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(data, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in data
    ):
        raise EnvBuildError("environment.version_files: must be a list of [path, version]")
    return tuple((p[0], p[1]) for p in data)


def check_spec(spec: EnvSpec) -> None:
    if not _PYTHON.match(spec.python):
        raise EnvBuildError(f"environment.python {spec.python!r}: expected a version such as '3.11'")
    if len(spec.requirements) > MAX_REQUIREMENTS:
        raise EnvBuildError(f"environment.requirements: {len(spec.requirements)} entries, at most {MAX_REQUIREMENTS}")
    for line in spec.requirements:
        check_requirement(line)
    if len(spec.variables) > MAX_VARIABLES:
        raise EnvBuildError(f"environment.variables: at most {MAX_VARIABLES} entries")
    for name, value in spec.variables:
        if not _VARIABLE.match(name) or name.startswith(RESERVED_VARIABLE_PREFIXES) or name in RESERVED_VARIABLES:
            raise EnvBuildError(
                f"environment.variables: {name[:64]!r} is not a NAME the task may set "
                "(letters, digits, _; not PATH, HOME, PYTHON*, PYTEST_*, LD_*, CRUCIBLE_*)"
            )
        if len(value) > MAX_VARIABLE_CHARS or not value.isprintable():
            raise EnvBuildError(f"environment.variables.{name}: at most {MAX_VARIABLE_CHARS} printable characters")
    _check_version_files(spec.version_files)
    if len(spec.pythonpath) > MAX_PYTHONPATH:
        raise EnvBuildError(f"environment.pythonpath: at most {MAX_PYTHONPATH} entries")
    for entry in spec.pythonpath:
        path = PurePosixPath(entry)
        if not entry or path.is_absolute() or ".." in path.parts or "\\" in entry or "\0" in entry or ":" in entry:
            raise EnvBuildError(f"environment.pythonpath {entry!r}: must be a relative path inside the repository")


def _check_version_files(files: tuple[tuple[str, str], ...]) -> None:
    if len(files) > MAX_VERSION_FILES:
        raise EnvBuildError(f"environment.version_files: at most {MAX_VERSION_FILES} entries")
    for file, version in files:
        try:
            check_version_file(file, version)
        except ProjectError as exc:
            raise EnvBuildError(str(exc)) from None


def check_requirement(line: str) -> Requirement:
    """A registry requirement only: `name[extras] (specifier) ; marker`. No URL, path or pip option."""
    if len(line) > MAX_REQUIREMENT_CHARS:
        raise EnvBuildError(f"requirement {line[:60]!r}...: longer than {MAX_REQUIREMENT_CHARS} characters")
    if line.lstrip().startswith("-") or "\n" in line or "\r" in line:
        raise EnvBuildError(f"requirement {line!r}: pip options are not requirements")
    try:
        requirement = Requirement(line)
    except InvalidRequirement as exc:
        raise EnvBuildError(f"requirement {line!r}: {exc}") from None
    if requirement.url:
        raise EnvBuildError(f"requirement {line!r}: only packages from the registry, never a URL or a path")
    return requirement


@dataclass(frozen=True)
class Environment:
    """A built environment: the venv at `path`, read-only, and what it was built from."""

    key: str
    path: Path
    spec: EnvSpec
    lock: tuple[str, ...]
    size_bytes: int
    build_seconds: float
    built_now: bool = False

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    @property
    def log_path(self) -> Path:
        return self.path.parent / f"{self.key}.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return ""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "spec": self.spec.to_json(),
            "lock": list(self.lock),
            "size_bytes": self.size_bytes,
            "build_seconds": self.build_seconds,
        }


# Ways to get a built environment before installing one: a deployment's object store, where a
# host that built it put it (tasks.environments registers that one). Each takes the spec and the
# root, and returns the complete environment it placed at root/<key>, or None.
Fetcher = Callable[[EnvSpec, Path], Path | None]
_fetchers: list[Fetcher] = []


def register_fetcher(fetcher: Fetcher) -> None:
    if fetcher not in _fetchers:
        _fetchers.append(fetcher)


def _fetched(spec: EnvSpec, root: Path) -> Environment | None:
    for fetcher in _fetchers:
        try:
            placed = fetcher(spec, root)
        except Exception as exc:  # noqa: BLE001 - a fetcher that fails leaves the registry to try
            logger.warning("environment %s: fetching it failed, installing instead: %s", spec.spec_hash(), exc)
            continue
        env = load_environment(placed) if placed is not None else None
        if env is not None:
            _index(root, spec, env.key)
            logger.info("environment %s fetched instead of installed", env.key)
            return env
    return None


def env_root() -> Path:
    """Where environments live: $CRUCIBLE_ENV_DIR, or beside the runner venvs (the interpreter's lifetime)."""
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(configured).resolve()
    return runner_root().parent / "crucible-envs"


def find_environment(spec: EnvSpec) -> Environment | None:
    """The environment already built for this spec on this host, or None; never builds."""
    root = env_root()
    try:
        key = json.loads((root / "specs" / f"{spec.spec_hash()}.json").read_text())["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(key, str) or not _KEY.match(key):
        return None
    return load_environment(root / key)


def load_environment(path: Path) -> Environment | None:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        return Environment(
            key=path.name,
            path=path,
            spec=EnvSpec.from_json(manifest["spec"]),
            lock=tuple(manifest["lock"]),
            size_bytes=int(manifest["size_bytes"]),
            build_seconds=float(manifest["build_seconds"]),
        )
    except (OSError, ValueError, KeyError, TypeError, EnvBuildError):
        return None


def ensure_environment(spec: EnvSpec, *, rebuild: bool = False, allow_sdist: bool = False) -> Environment:
    """The environment for `spec`, installed from the registry now if this host has none yet.

    Concurrent callers for the same spec wait on one build (a file lock), and the venv appears
    under its key in one rename, so nobody ever runs tests in half an environment. The venv is
    shared by every spec with the same lock; what is the task's own (its import paths) comes
    from `spec`, never from whichever spec built the venv first.
    """
    return replace(_ensure(spec, rebuild, allow_sdist), spec=spec)


def _ensure(spec: EnvSpec, rebuild: bool, allow_sdist: bool) -> Environment:
    check_spec(spec)
    if spec.python != current_python():
        raise EnvBuildError(
            f"environment.python {spec.python}: this host runs Python {current_python()} and has no other interpreter"
        )
    root = env_root()
    if not rebuild:
        found = find_environment(spec)
        if found is not None:
            return found
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the sandbox's user reads environments through a read-only bind
    (root / "specs").mkdir(exist_ok=True)
    with file_lock(root / f".lock-{spec.spec_hash()}"):
        if not rebuild:
            found = find_environment(spec) or _fetched(spec, root)
            if found is not None:
                return found
        return _build(root, spec, allow_sdist)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) across processes, held for the block."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pip_install_argv(python: str, requirements_file: Path, report: Path, allow_sdist: bool) -> list[str]:
    """pip, run by Crucible's interpreter, installing into the environment's (pip >= 22.3 `--python`)."""
    argv = [sys.executable, "-m", "pip", "--python", python, "install", "--no-input", "--disable-pip-version-check"]
    argv += ["--no-warn-script-location", "--no-cache-dir", "--report", str(report), "-r", str(requirements_file)]
    if not allow_sdist:
        # A wheel is unpacked, never run: an sdist would execute its setup.py on this host.
        argv.append("--only-binary=:all:")
    return argv


def _build(root: Path, spec: EnvSpec, allow_sdist: bool) -> Environment:
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    log_lines: list[str] = [f"environment for {json.dumps(spec.to_json())}"]
    try:
        venv.EnvBuilder(system_site_packages=False, symlinks=True, with_pip=False).create(staging)
        requirements = staging.parent / f"{staging.name}.requirements.txt"
        requirements.write_text("".join(f"{line}\n" for line in spec.requirements))
        report = staging.parent / f"{staging.name}.report.json"
        argv = pip_install_argv(str(staging / "bin" / "python"), requirements, report, allow_sdist)
        log_lines.append("$ " + " ".join(argv))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        try:
            done = subprocess.run(  # noqa: S603 - a fixed argv; the requirements were checked above
                argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            raise EnvBuildError(f"pip did not finish within {BUILD_TIMEOUT_S} s") from None
        finally:
            requirements.unlink(missing_ok=True)
        log_lines += [done.stdout, done.stderr]
        if done.returncode != 0:
            raise EnvBuildError(f"pip exited {done.returncode}: {_pip_errors(done.stderr or done.stdout)}")
        lock = _lock_from_report(report)
        report.unlink(missing_ok=True)
        key = environment_key(spec, lock)
        target = root / key
        if load_environment(target) is None:
            _finish(staging, target, spec, lock, time.monotonic() - started)
            try:
                os.rename(staging, target)
            except OSError:
                if load_environment(target) is None:
                    raise
        else:
            # Another spec resolved to the same lock: that environment serves this one too.
            shutil.rmtree(staging, ignore_errors=True)
        log_lines.append(f"built {key} in {time.monotonic() - started:.1f} s")
        (root / f"{key}.log").write_text("\n".join(log_lines)[-LOG_TAIL_CHARS * 5 :])
        _index(root, spec, key)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for leftover in (f"{staging.name}.requirements.txt", f"{staging.name}.report.json"):
            (root / leftover).unlink(missing_ok=True)
        raise
    built = load_environment(target)
    if built is None:
        raise EnvBuildError(f"environment {key}: built but its manifest is unreadable")
    logger.info("environment %s built in %.1f s (%d packages)", key, built.build_seconds, len(lock))
    return Environment(**{**built.__dict__, "built_now": True})


def _index(root: Path, spec: EnvSpec, key: str) -> None:
    """spec -> key, so the next lookup of this spec is one file read (no resolution, no network)."""
    (root / "specs" / f"{spec.spec_hash()}.json").write_text(json.dumps({"key": key, "spec": spec.to_json()}))


def environment_key(spec: EnvSpec, lock: Sequence[str]) -> str:
    """Content address of an environment: the interpreter, its import paths and the exact versions."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    text = json.dumps([FORMAT, sys.version, base, sorted(lock)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _lock_from_report(report: Path) -> tuple[str, ...]:
    data = json.loads(report.read_text())
    pins = {f"{normalise(item['metadata']['name'])}=={item['metadata']['version']}" for item in data.get("install", [])}
    return tuple(sorted(pins))


def _finish(env: Path, target: Path, spec: EnvSpec, lock: tuple[str, ...], seconds: float) -> None:
    """Point console scripts at the final path, make everything read-only, write the manifest last."""
    staging_bin = str(env / "bin")
    for script in (env / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        with contextlib.suppress(UnicodeDecodeError):
            text = script.read_text()
            if text.startswith("#!") and staging_bin in text.splitlines()[0]:
                script.write_text(text.replace(staging_bin, str(target / "bin"), 1))
    for leftover in ("activate", "activate.csh", "activate.fish", "Activate.ps1"):
        (env / "bin" / leftover).unlink(missing_ok=True)  # they name the staging path
    (env / EMPTY_DIR).mkdir(exist_ok=True)
    size = 0
    for directory, _, files in os.walk(env):
        os.chmod(directory, 0o755)  # noqa: S103 - read by the sandbox's user, mounted read-only
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                size += path.stat().st_size
                executable = path.parent.name == "bin" or os.access(path, os.X_OK)
                path.chmod(0o555 if executable else 0o444)
    manifest = {
        "format": FORMAT,
        "spec": spec.to_json(),
        "lock": list(lock),
        "python": sys.version,
        "size_bytes": size,
        "build_seconds": round(seconds, 2),
    }
    # Written last: its presence is what says the environment is complete.
    (env / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (env / MANIFEST).chmod(0o444)


def remove_environment(env: Environment) -> None:
    """Delete an environment (its files are read-only: make them writable first)."""
    for directory, _, _ in os.walk(env.path):
        os.chmod(directory, 0o755)  # noqa: S103
    shutil.rmtree(env.path, ignore_errors=True)
    env.log_path.unlink(missing_ok=True)


def _pip_errors(text: str) -> str:
    """pip's ERROR lines (its WARNINGs about index locations say nothing about this build), else its last lines."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return " | ".join(errors or lines[-6:])[:800]
