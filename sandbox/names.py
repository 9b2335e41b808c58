"""The sandbox backends by name: the one list every choice field and flag derives from."""

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
