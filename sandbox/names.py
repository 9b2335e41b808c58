"""Names that cross the sandbox's boundary: the backends, and the limits that end a command.

The one list every choice field, flag and result derives from.
"""

from __future__ import annotations

from enum import StrEnum


class BackendName(StrEnum):
    BWRAP = "bwrap"
    DOCKER = "docker"
    # Runs commands on the host with no isolation: tests and trusted code only.
    LOCAL = "local"


DEFAULT_BACKEND = BackendName.BWRAP
# What a rollout or a scoring job may be given from outside; `local` never is.
ISOLATING_BACKENDS = (BackendName.BWRAP, BackendName.DOCKER)


class KillReason(StrEnum):
    """The limit that made the supervisor kill a command (`ExecResult.killed_by`)."""

    WALL = "wall"
    OUTPUT = "output"
    WORKSPACE = "workspace"
