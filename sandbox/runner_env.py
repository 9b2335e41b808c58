"""The test runner's own environment: a small venv with pytest and what pytest needs, nothing else.

The sandbox's `python` must run the repository's code, never Crucible's: with Crucible's venv
on the path, a repository that ships `yaml`, `django` or `sqlparse` in a `src/` layout would
import the copy Crucible installed, and its tests would pass against code that is not the
repository's. So the sandbox gets a venv of its own, made from the same interpreter without
system site-packages, holding only pytest and its requirements.

Those are copied from the distributions installed beside Crucible (the versions
`requirements/lock.txt` pins): no index, no network, the same runner everywhere. Their bytecode is
compiled in the venv itself: an installer's record of a distribution may list no bytecode (uv
compiles after it writes the record), and the sandbox, read-only, could never write any, so each
sandboxed run would compile pytest again.
The venv is keyed by a hash of the interpreter and those versions, built once (atomically, so
concurrent workers never see half of one) and mounted read-only by the backends.
"""

from __future__ import annotations

import compileall
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import venv
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

logger = logging.getLogger(__name__)

RUNNER_REQUIREMENTS = ("pytest",)
FORMAT = 3  # bump when the layout below changes: a new key, a new venv (3: bytecode compiled in place)
ROOT_ENV = "CRUCIBLE_RUNNER_DIR"
MANIFEST = "crucible-runner.json"
# An empty directory the backends mount read-only over what a sandbox must not see into.
EMPTY_DIR = "empty"
SCRIPT = """#!/bin/sh
# The runner's {name}: relative to this file, so the venv works wherever it is mounted.
exec "${{0%/*}}/python" -c 'import sys; from {module} import {attr}; sys.argv[0] = "{name}"; sys.exit({attr}())' "$@"
"""
_NAME = re.compile(r"[-_.]+")


class RunnerEnvError(RuntimeError):
    """The runner environment could not be made."""


def runner_root() -> Path:
    """Where runner venvs live: beside Crucible's own venv (its lifetime), or $CRUCIBLE_RUNNER_DIR."""
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(configured).resolve()
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix).resolve() / "crucible-runners"
    return Path.home() / ".cache" / "crucible" / "runners"


def runner_distributions() -> list[metadata.Distribution]:
    """pytest and everything it requires on this interpreter, as installed beside Crucible."""
    found: dict[str, metadata.Distribution] = {}
    pending = list(RUNNER_REQUIREMENTS)
    while pending:
        name = _NAME.sub("-", pending.pop()).lower()
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RunnerEnvError(f"{name} is not installed beside Crucible; run `make setup`") from None
        found[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return [found[name] for name in sorted(found)]


def runner_key(dists: list[metadata.Distribution]) -> str:
    pins = sorted(f"{_NAME.sub('-', d.metadata['Name']).lower()}=={d.version}" for d in dists)
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    text = json.dumps([FORMAT, sys.version, base, pins])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.cache
def ensure_runner_env() -> Path:
    """The runner venv for this interpreter and these pins, built now if it is not there yet."""
    dists = runner_distributions()
    root = runner_root()
    target = root / f"runner-{runner_key(dists)}"
    if (target / MANIFEST).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the sandbox's unprivileged user reads it through a bind mount
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        _build(staging, dists)
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / MANIFEST).is_file():
                raise
            # Another process finished the same venv first; theirs is as good as ours.
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("runner environment %s built in %.0f ms", target, (time.monotonic() - started) * 1000)
    return target


def site_packages(env: Path) -> Path:
    return env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _build(env: Path, dists: list[metadata.Distribution]) -> None:
    venv.EnvBuilder(system_site_packages=False, symlinks=True, with_pip=False).create(env)
    for leftover in ("activate", "activate.csh", "activate.fish", "Activate.ps1"):
        (env / "bin" / leftover).unlink(missing_ok=True)  # they name the staging path
    dest = site_packages(env)
    copied = 0
    for dist in dists:
        for file in dist.files or []:
            if ".." in file.parts:
                continue  # console scripts: their shebangs name Crucible's python; made below
            source = Path(str(dist.locate_file(file)))
            if not source.is_file():
                continue
            (dest / file).parent.mkdir(parents=True, exist_ok=True)
            # copy2 keeps the mtime, so the copied bytecode stays valid for its source.
            shutil.copy2(source, dest / file)
            copied += 1
        for entry in dist.entry_points.select(group="console_scripts"):
            module, _, attr = entry.value.partition(":")
            script = env / "bin" / entry.name
            script.write_text(SCRIPT.format(name=entry.name, module=module, attr=attr))
            script.chmod(0o755)
    # Against the copies' own mtimes (copy2 kept them): valid wherever the venv is mounted, since
    # the import system takes a module's file name from where it finds the source.
    if not compileall.compile_dir(str(dest), quiet=1, workers=1):
        raise RunnerEnvError(f"could not compile the runner's bytecode in {dest}")
    (env / EMPTY_DIR).mkdir()
    manifest = {"python": sys.version, "distributions": {d.metadata["Name"]: d.version for d in dists}}
    for directory, _, files in os.walk(env):
        os.chmod(directory, 0o755)  # noqa: S103 - read by the sandbox's user, mounted read-only
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                path.chmod(0o755 if path.parent.name == "bin" else 0o644)
    # Written last: its presence is what says the venv is complete.
    (env / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (env / MANIFEST).chmod(0o644)
    logger.debug("runner environment: %d files from %d distributions", copied, len(dists))
