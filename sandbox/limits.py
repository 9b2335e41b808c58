"""Resource limits applied to every command a sandbox runs, whatever the backend."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 120.0  # kills the whole process group
    cpu_seconds: int = 120
    memory_mb: int = 2048  # address space; the docker backend uses it as the memory limit
    pids: int = 256
    file_size_mb: int = 64  # largest single file a command may write
    open_files: int = 512
    output_bytes: int = 64 * 1024  # kept per stream: head and tail halves
    output_hard_bytes: int = 64 * 1024 * 1024  # read past this, the command is killed
    workspace_mb: int = 512  # total workspace size; checked while a command runs

    def with_timeout(self, seconds: float | None) -> Limits:
        return self if seconds is None else replace(self, wall_seconds=float(seconds))
