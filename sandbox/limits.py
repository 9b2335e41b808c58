"""Resource limits applied to every command a sandbox runs, whatever the backend."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 120.0  # kills the whole process group
    cpu_seconds: int = 120
    # The command's memory as a whole: processes and what they keep in its tmpfs (/tmp,
    # /dev/shm). Exact where a memory cgroup holds it (root, and always on the docker
    # backend); otherwise each process's address space, with the tmpfs sized within it.
    memory_mb: int = 2048
    pids: int = 256
    file_size_mb: int = 64  # largest single file a command may write
    open_files: int = 512
    output_bytes: int = 64 * 1024  # kept per stream: head and tail halves
    output_hard_bytes: int = 64 * 1024 * 1024  # read past this, the command is killed
    workspace_mb: int = 512  # total workspace size; checked while a command runs
    shm_mb: int = 64  # /dev/shm, at most; see tmpfs_mb

    def with_timeout(self, seconds: float | None) -> Limits:
        return self if seconds is None else replace(self, wall_seconds=float(seconds))

    def tmpfs_mb(self) -> tuple[int, int]:
        """Sizes of the command's private /tmp and /dev/shm, in MB.

        A tmpfs holds its files in memory that no RLIMIT_AS sees: unsized, it is half the
        host's RAM, and a command could park gigabytes there past its memory limit. So the
        two together get at most half of `memory_mb`, whether or not a cgroup also counts them.
        """
        budget = max(2, self.memory_mb // 2)
        shm = max(1, min(self.shm_mb, budget // 4))
        return max(1, min(self.workspace_mb, budget - shm)), shm
