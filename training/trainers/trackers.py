"""Experiment trackers a run reports to besides Crucible (`logging.report_to`, training.schema).

TensorBoard event files are written through tensorboardX (a dependency) into the run's output;
W&B and MLflow through their own packages, where the trainer's host has them installed and
configured. A tracker the host lacks is refused before any training, by name.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from training.schema import check_report_to


class TrackerError(ValueError):
    """A `logging.report_to` this host cannot honour."""


def installed_trackers(value: Any) -> list[str]:
    """`logging.report_to` as the trackers to report to, each one this host can use."""
    trackers, problem = check_report_to(value)
    if problem:
        raise TrackerError(f"config.logging.report_to {problem}, not {value!r}")
    for tracker in trackers:
        if tracker != "tensorboard" and importlib.util.find_spec(tracker) is None:
            raise TrackerError(
                f"config.logging.report_to: {tracker} is not installed on this host "
                f"(pip install {tracker} and configure it, or leave it out)"
            )
    return trackers


def tracker_directories(report_to: list[str], run_output: Path) -> None:
    """TensorBoard's event files go under the run's output, one file for every launch of the run
    (a resumed run adds a file beside the first), so `tensorboard --logdir` on it shows the whole run."""
    if "tensorboard" in report_to:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_output / "tensorboard")
