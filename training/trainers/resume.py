"""Resuming a run where it stopped: the optimizer, schedule, RNG and data position as saved.

Each checkpoint the Trainer saves holds, beside the weights, the state a run needs to go on as if
it had never stopped: the optimizer's moments, the learning-rate schedule, every process's RNG
and `trainer_state.json` (the step, which tells the Trainer how many batches to skip). Adam's
state is twice the model's size, so only a run's newest checkpoint keeps it (`prune_states`);
older checkpoints keep their weights, which is all that serving, evaluating or fine-tuning needs,
and all the object store publishes (`is_state_file`).

A resumed run's config names its checkpoint as the base model and the step it reached. When that
directory holds the state of that step, the Trainer resumes from it for the run's remaining
steps. When it does not (a checkpoint saved before state was kept, or fetched from another
host, where only the weights travel), the run goes on from the weights alone, for the steps left,
in a directory of its own so it overwrites no earlier checkpoint, and its log says so. GRPO
generates at the start of an optimizer step, so a checkpoint (taken after one) holds no half-used
generations: the RNG and the data position are its whole generation state.

Plain Python, no Django: the trainer subprocess and the checkpoint store both read it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What the Trainer writes beside the weights when it saves the whole training state.
STATE_FILES = frozenset({"optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "training_args.bin"})
RNG_FILE = re.compile(r"rng_state(_\d+)?\.pth")
CHECKPOINT_DIR = re.compile(r"checkpoint-\d+")


class ResumeError(ValueError):
    """A config's resume section that cannot be right."""


def is_state_file(name: str) -> bool:
    """True for a file of the training state (not the model): kept for resuming, never published."""
    return name in STATE_FILES or RNG_FILE.fullmatch(name) is not None


def saved_step(directory: Path) -> int | None:
    """The step whose whole training state `directory` holds, or None where it holds weights only."""
    if not (directory / "optimizer.pt").is_file():
        return None
    try:
        state = json.loads((directory / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    step = state.get("global_step") if isinstance(state, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


@dataclass(frozen=True)
class ResumePlan:
    """How this process continues a run; the defaults are a fresh run."""

    max_steps: int  # the Trainer's max_steps: the run's total when resuming with state, else the steps left
    output_dir: Path
    step_offset: int = 0  # added to the Trainer's step in events: the run's step (weights-only resume)
    state: Path | None = None  # the checkpoint to resume from, state and all
    at_step: int = 0  # the run's steps done before this process


def plan(resume: Any, base_model: Path, output_dir: Path, max_steps: int) -> ResumePlan:
    """The plan for a config whose `resume` section is `resume` (absent for a fresh run)."""
    if resume is None:
        return ResumePlan(max_steps=max_steps, output_dir=output_dir)
    step = resume.get("step") if isinstance(resume, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ResumeError(f"config.resume.step must be a whole number >= 0, not {step!r}")
    if step == 0:
        return ResumePlan(max_steps=max_steps, output_dir=output_dir)
    if saved_step(base_model) == step:
        # At least one step more: a run that failed after its last checkpoint still ends on a new one.
        return ResumePlan(max_steps=max(max_steps, step + 1), output_dir=output_dir, state=base_model, at_step=step)
    return ResumePlan(
        max_steps=max(1, max_steps - step),
        # The Trainer counts from 0 again: in the run's own directory it would overwrite checkpoint-1...
        output_dir=output_dir / f"after-step-{step}",
        step_offset=step,
        at_step=step,
    )


def describe(plan_: ResumePlan, base_model: Path) -> str:
    """The log line that says how the run goes on."""
    if plan_.state is not None:
        return (
            f"resuming at step {plan_.at_step} of {plan_.max_steps} with the optimizer, schedule, RNG and "
            f"data position saved in {plan_.state}"
        )
    return (
        f"resuming from the weights of step {plan_.at_step} alone ({base_model} holds no training state "
        f"of that step): the optimizer and schedule start afresh for the {plan_.max_steps} steps left"
    )


def prune_states(root: Path, keep: Path) -> list[Path]:
    """Delete the training state of every checkpoint under `root` but `keep`; the files removed."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    keep = keep.resolve()
    directories = [root, *(child for child in root.iterdir() if child.is_dir())]
    for parent in directories:
        for directory in parent.iterdir():
            if not directory.is_dir() or not CHECKPOINT_DIR.fullmatch(directory.name) or directory.resolve() == keep:
                continue
            for path in directory.iterdir():
                if path.is_file() and not path.is_symlink() and is_state_file(path.name):
                    path.unlink(missing_ok=True)
                    removed.append(path)
    return removed
