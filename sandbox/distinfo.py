"""The repository's own distribution metadata, without installing the repository.

Its code is imported from the workspace (a `src/` layout through the environment's import
paths), never installed, so `importlib.metadata.version("pkg")`, which many packages call at
import time, would find nothing and the suite fail before its first test. The name, version
and entry points are read from the snapshot's packaging files at build time (data, never run),
kept in the environment spec, and the harness writes a `.dist-info` for them into its own
directory, which is first on the test run's import path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

# Matched whole (fullmatch): a newline anywhere would start another METADATA field or ini section.
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
GROUP = re.compile(r"[A-Za-z0-9_.-]{1,100}")
ENTRY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
ENTRY_VALUE = re.compile(r"[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?(?: *\[[\w, -]*\])?", re.ASCII)
MAX_ENTRY_POINTS = 200


class ProjectError(ValueError):
    """Project metadata that cannot be written safely."""


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    # (group, name, "module:attr") triples: console_scripts, plugin groups.
    entry_points: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ProjectError(f"environment.project.name {self.name[:60]!r} is not a distribution name")
        try:
            if not self.version.isprintable() or self.version != self.version.strip():
                raise InvalidVersion(self.version)
            Version(self.version)
        except InvalidVersion:
            raise ProjectError(f"environment.project.version {self.version[:60]!r} is not a PEP 440 version") from None
        if len(self.entry_points) > MAX_ENTRY_POINTS:
            raise ProjectError(f"environment.project.entry_points: at most {MAX_ENTRY_POINTS}")
        for group, name, value in self.entry_points:
            if not (GROUP.fullmatch(group) and ENTRY_NAME.fullmatch(name) and ENTRY_VALUE.fullmatch(value)):
                raise ProjectError(f"environment.project.entry_points: {group!r} {name!r} = {value[:60]!r} is refused")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "entry_points": [list(e) for e in self.entry_points]}

    @classmethod
    def from_json(cls, data: object) -> Project:
        if not (isinstance(data, dict) and isinstance(data.get("name"), str) and isinstance(data.get("version"), str)):
            raise ProjectError("environment.project: must be an object with a string name and version")
        points = data.get("entry_points", [])
        if not isinstance(points, list) or not all(
            isinstance(p, list) and len(p) == 3 and all(isinstance(x, str) for x in p) for p in points
        ):
            raise ProjectError("environment.project.entry_points: must be a list of [group, name, value]")
        return cls(data["name"], data["version"], tuple((p[0], p[1], p[2]) for p in points))

    def write(self, directory: Path) -> Path:
        """`<name>-<version>.dist-info` in `directory`, with METADATA and entry_points.txt."""
        stem = re.sub(r"[-_.]+", "_", self.name)
        dist = directory / f"{stem}-{self.version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n")
        (dist / "INSTALLER").write_text("crucible\n")
        groups: dict[str, list[str]] = {}
        for group, name, value in self.entry_points:
            groups.setdefault(group, []).append(f"{name} = {value}")
        if groups:
            text = "".join(f"[{group}]\n" + "".join(f"{e}\n" for e in lines) + "\n" for group, lines in groups.items())
            (dist / "entry_points.txt").write_text(text)
        return dist
