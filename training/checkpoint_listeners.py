"""What apps above `training` do with each checkpoint a run saves.

`training` is below `evaluation`, so the launcher cannot import it. An app above registers a
listener in its `AppConfig.ready()` (evaluation evaluates the checkpoints of a run that asks it
to); the launcher calls each once a checkpoint's row is committed and its files are published.
A listener answers with a line for the run's log ("" for nothing to say). A listener that fails
is logged and named in the run's log: a run never fails for what is done with its checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from training.models import Checkpoint

logger = logging.getLogger(__name__)

CheckpointListener = Callable[["Checkpoint"], str]

_listeners: dict[str, CheckpointListener] = {}


def on_checkpoint_saved(key: str, listener: CheckpointListener) -> None:
    if key in _listeners:
        raise ValueError(f"checkpoint listener {key!r} is registered twice")
    _listeners[key] = listener


def checkpoint_saved(checkpoint: Checkpoint) -> list[str]:
    """Call every listener on a saved checkpoint; the lines they have for the run's log."""
    lines = []
    for key, listener in _listeners.items():
        try:
            line = listener(checkpoint)
        except Exception as exc:  # noqa: BLE001 - the run goes on; its log says what did not happen
            logger.exception("checkpoint %s: the %s listener failed", checkpoint.pk, key)
            line = f"checkpoint {checkpoint.pk}: {key} failed: {type(exc).__name__}: {exc}"
        if line:
            lines.append(line)
    return lines
