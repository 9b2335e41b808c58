"""Which Go or Node stands in for a Harbor image's (tasks.harbor_toolchains), without installing any:
the system's for its own version, a clear refusal for a version no release here has."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.go_run import SYSTEM_GO, find_toolchain
from sandbox.node_versions import system_version as system_node_version
from tasks.harbor_toolchains import StandIn, ToolchainImageError, stand_in


@pytest.mark.parametrize("image", ["python:3.11-slim", "debian:bookworm", "ubuntu:24.04", "golang", "node:lts", ""])
def test_an_image_that_names_no_go_or_node_version_changes_nothing(image: str) -> None:
    assert stand_in(image) == StandIn()


@pytest.mark.skipif(not os.path.exists(SYSTEM_GO), reason="Debian's Go 1.19 is the system's")
def test_the_systems_go_stands_in_for_its_own_minor_version() -> None:
    found = stand_in("golang:1.19-bookworm")
    assert found.env["GOROOT"] == str(find_toolchain().goroot) and found.path.endswith("/bin")
    assert found.variables("/usr/bin:/bin")["PATH"] == f"{found.path}:/usr/bin:/bin"


def test_the_systems_node_stands_in_for_its_own_major_version() -> None:
    major = system_node_version().split(".")[0]
    assert major, "no system node"
    found = stand_in(f"node:{major}-bookworm-slim")
    assert (found.path, found.binds) == ("", []) and found.name.startswith(f"node {major}.")


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("golang:1.20-bookworm", "no Go release here has that version"),
        ("golang:1.99", "no known Go release satisfies it"),
        ("node:12-alpine", "no Node release here has that major version"),
    ],
)
def test_a_version_no_release_here_has_is_refused_with_what_there_is(image: str, message: str) -> None:
    with pytest.raises(ToolchainImageError, match=message):
        stand_in(image)


def test_the_image_is_the_last_from_without_its_flags(tmp_path: Path) -> None:
    from tasks.harbor_run import read_dockerfile

    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "Dockerfile").write_text(
        "FROM node:22 AS build\nFROM --platform=linux/amd64 golang:1.19-bookworm AS test\nWORKDIR /app\n"
    )
    assert read_dockerfile(tmp_path, lenient=True).base == "golang:1.19-bookworm"
