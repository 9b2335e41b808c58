"""The trainer's log as events: each logged step a metric event (the Trainer's numbers under the run
page's names, its rates and what it costs the machine), each save a checkpoint event."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from training.trainers import resume
from training.trainers.common import TrainerConfig, clean_checkpoint, emit
from training.trainers.system import SystemUsage

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

# Trainer log keys -> the names the run page and the database use.
METRIC_NAMES = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "kl": "kl",
    "rewards/accuracies": "accuracy",
    "rewards/margins": "margin",
    "accuracy": "accuracy",
    "margin": "margin",
    "entropy": "entropy",
    "mean_token_accuracy": "token_accuracy",
    # GRPO: the share of generations that reached max_new_tokens (cut before they ended).
    "completions/clipped_ratio": "clipped_ratio",
}
# The summary Trainer logs once at the end (it alone has train_loss); it is not a training step.
SUMMARY_KEY = "train_loss"
# Bookkeeping the Trainer adds to every log; the events carry their own rates.
SKIPPED_KEYS = frozenset({"epoch", "train_runtime", "train_tokens_per_second", "num_input_tokens_seen", "num_tokens"})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class EventCallback(TrainerCallback):
    """Turns the Trainer's logs and saves into metric and checkpoint events."""

    def __init__(
        self, checkpoint_kind: str, extra: dict[str, float] | None = None, *, config: TrainerConfig | None = None
    ) -> None:
        self.checkpoint_kind = checkpoint_kind
        # A run resumed from weights alone counts its steps on from where it was (training.trainers.resume).
        self.offset = config.step_offset if config is not None else 0
        self.run_output = config.run_output if config is not None else None
        self.extra = dict(extra or {})  # values every metric event carries (dropped_for_length)
        self.latest: dict[str, float] = {}
        self.saved_steps: set[int] = set()
        self._clock = time.monotonic()
        self._last_step = 0
        self._last_tokens = 0
        self.system = SystemUsage()

    def add_values(self, values: dict[str, float]) -> None:
        """Values measured outside the Trainer (pairs dropped for length), sent with every metric."""
        self.extra.update(values)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        self._clock = time.monotonic()
        self._last_step = state.global_step
        self._last_tokens = int(state.num_input_tokens_seen or 0)
        self.system = SystemUsage()  # CPU use counted from here: loading the model is not a step's

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        logs = logs or {}
        if SUMMARY_KEY in logs or any(key.startswith("eval_") for key in logs):
            return  # the end-of-training summary, and the held-in measure (run_training's learned event)
        values: dict[str, float] = {}
        for key, value in logs.items():
            number = _number(value)
            if number is None or key in SKIPPED_KEYS:
                continue
            values[METRIC_NAMES.get(key, key.replace("/", "_"))] = number
        now = time.monotonic()
        elapsed = max(now - self._clock, 1e-9)
        steps = state.global_step - self._last_step
        # GRPO keeps its own running token count; the other trainers count input tokens in the state.
        tokens = int(_number(logs.get("num_tokens")) or state.num_input_tokens_seen or 0)
        if tokens > self._last_tokens:
            values["tokens_per_s"] = round((tokens - self._last_tokens) / elapsed, 3)
        if steps > 0:
            values["steps_per_min"] = round(steps * 60.0 / elapsed, 3)
        self._clock, self._last_step, self._last_tokens = now, state.global_step, tokens
        values.update(self.system.sample(), **self.extra)
        self.latest.update(values)
        # How many processes train together, as the Trainer's own process group counts them.
        step = self.offset + state.global_step
        emit({"event": "metric", "step": step, "values": values, "world_size": args.world_size})

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        path = Path(str(args.output_dir)) / f"checkpoint-{state.global_step}"
        if not state.is_world_process_zero or not path.is_dir() or state.global_step in self.saved_steps:
            return
        clean_checkpoint(path)
        self.saved_steps.add(state.global_step)
        emit(
            {
                "event": "checkpoint",
                "step": self.offset + state.global_step,
                "path": str(path.resolve()),
                "kind": self.checkpoint_kind,
                "metrics": dict(self.latest),
            }
        )
        # Only the newest checkpoint keeps the optimizer's state (twice the model's size). After the
        # event: a run killed in between still has one checkpoint the launcher knows to resume with.
        resume.prune_states(self.run_output or path.parent, keep=path)
