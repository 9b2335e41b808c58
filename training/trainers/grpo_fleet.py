"""GRPO agent episodes on the rollout fleet (`environment.episodes: fleet`): the trainer only computes losses.

For each generation TRL asks for (its `rollout_func`), this module
1. syncs the served policy (training.trainers.policy_server) when it lags the trainer's weights
   by more than `rl.max_staleness` optimizer steps;
2. starts one rollout batch per task of the generation (samples: that task's share of it), with
   the `openai` policy pointed at the policy server, run by the Celery `rollouts` workers in their
   sandboxes, on their live pages, and scored by the reward service like any batch (the spec's
   policies and its bounded `learned:` components apply);
3. waits for every episode to end and be scored, and hands TRL the tokens the server sampled, with
   what the environment said in between masked out of the loss (trajectories.interchange.episodes).

An episode's policy version is the oldest fingerprint among its steps (which weights wrote each
turn); its staleness, the trainer's step minus that version, is recorded per sample. An episode
that cannot be learned from (failed, cancelled, unscored, written by unknown weights, or older
than the bound) gets no reward: TRL leaves it out of its group's baseline and the loss, and the
run counts it. A generation with no episode to learn from stops the run with the reasons.

The trainer stays plain Python, with no database: it asks its launcher (training.launcher, which
follows its output) with an `episodes` event, and the launcher starts the batches and writes the
scored episodes to CRUCIBLE_FLEET_DIR/<request>.json (training.fleet_episodes), where this waits.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.names import DEFAULT_BACKEND
from tasks.lang_tests import PYTHON
from training.trainers.common import TrainerConfig, TrainerError, emit, log
from training.trainers.policy_server import PolicyServer, policy_version
from trajectories.schema import MODEL_CALL

POLL_S = 0.25
FLEET_DIR_ENV = "CRUCIBLE_FLEET_DIR"  # set by the launcher: where its answers appear
TASK_KEY = "task_id"  # the user message of a fleet prompt names its task (GRPO rows are per task)


def fleet_prompt(statement: str, task_id: str) -> list[dict[str, str]]:
    """A fleet row's prompt: the worker's agent builds the real one from the task; this names the task."""
    return [{"role": "user", "content": statement, TASK_KEY: task_id}]


def task_of(prompt: Any) -> str:
    for message in reversed(prompt if isinstance(prompt, list) else []):
        if isinstance(message, dict) and message.get(TASK_KEY):
            return str(message[TASK_KEY])
    raise TrainerError("a fleet prompt names no task (training.trainers.grpo_fleet.fleet_prompt)")


@dataclass
class Sample:
    """One episode as TRL takes it, and what the run records of it."""

    trajectory_id: str
    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None]
    reward: float | None = None
    version: int | None = None
    staleness: int | None = None
    dropped: str = ""  # why it is not learned from ("" when it is)
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dispatch:
    """One request to the launcher: the generation's task per position."""

    request: int
    task_ids: list[str]


class Fleet:
    """TRL's rollout_func for fleet episodes; the policy server starts with the first generation."""

    def __init__(self, config: TrainerConfig, tokenizer: Any) -> None:
        given = os.environ.get(FLEET_DIR_ENV, "")
        if not given:
            raise TrainerError(
                "environment.episodes fleet needs Crucible's launcher to start the episodes: "
                "run it as a training run (/training/ or the API), not by hand"
            )
        self.fleet_dir = Path(given)
        self.requests = 0
        self.config = config
        self.tokenizer = tokenizer
        self.server: PolicyServer | None = None
        self.pending: Dispatch | None = None  # episodes started one generation ahead (_ahead)
        self.dispatched = 0
        self.dropped: Counter[str] = Counter()
        max_steps = int(config.environment.get("max_steps", 30))
        command_s = float(config.environment.get("timeout_seconds", 60) or 60)
        # A whole generation's wait: every turn's command and reply, plus queueing and scoring.
        self.wait_s = max_steps * (command_s + 120.0) + 900.0

    def close(self) -> None:
        if self.pending is not None:  # started for a step that will not come (the run failed or was stopped)
            self._cancel(self.pending)
            self.pending = None
        if self.server is not None:
            self.server.close()
        if self.dispatched:
            left_out = ", ".join(f"{n} {why}" for why, n in self.dropped.most_common()) or "none"
            log(f"grpo fleet: {self.dispatched} episodes asked for; left out of the loss: {left_out}")

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        step = int(trainer.state.global_step)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.server is None:
            self.server = PolicyServer(model, self.tokenizer).start()
            self.server.version = step
            log(f"grpo fleet: serving the policy at {self.server.base_url} (v{step})")
        task_ids = [task_of(p) for p in prompts]
        if self.config.max_staleness < 1:
            self._sync(model, step, learned_at=step)
            samples = self._collect(self._dispatch(task_ids, step), step)
        else:
            samples = self._ahead(model, task_ids, step, int(trainer.state.max_steps))
        learned = [s for s in samples if not s.dropped]
        if not learned:
            reasons = Counter(s.dropped for s in samples)
            raise TrainerError(
                f"no episode of step {step} can be learned from: "
                + ", ".join(f"{n} {why}" for why, n in reasons.most_common())
            )
        return {
            "prompt_ids": [s.prompt_ids for s in samples],
            "completion_ids": [s.completion_ids for s in samples],
            "env_mask": [s.env_mask for s in samples],
            # TRL takes None (not sampled by the server: rendered) as NaN and leaves it out.
            "logprobs": [s.logprobs for s in samples],
            "fleet_reward": [s.reward for s in samples],
            "fleet_task": [s.task_id for s in samples],
            "fleet_trajectory": [s.trajectory_id for s in samples],
            "fleet_version": [s.version for s in samples],
            "fleet_staleness": [s.staleness for s in samples],
            "fleet_dropped": [s.dropped for s in samples],
            "fleet_truncated": [s.truncated for s in samples],
            # The run's optimizer step that learns from them (the launcher's step numbering).
            "fleet_step": [step + self.config.step_offset + 1] * len(samples),
        }

    def _ahead(self, model: Any, task_ids: list[str], step: int, max_steps: int) -> list[Sample]:
        """One generation ahead (rl.max_staleness >= 1): the episodes this step learns from were started
        when the last step began, and ran on the fleet while it trained; this step's prompts start now,
        for the next step. The first step has none waiting, so it waits for its own prompts' episodes
        once and starts them a second time (other seeds) for the next step: the run's data is one step
        behind TRL's order, and the prompts of its last step are never sampled."""
        waiting = self.pending
        self.pending = None
        if waiting is None or len(waiting.task_ids) != len(task_ids):
            if waiting is not None:
                self._cancel(waiting)
            self._sync(model, step, learned_at=step)
            waiting = self._dispatch(task_ids, step)
        if step + 1 < max_steps:
            self._sync(model, step, learned_at=step + 1)
            self.pending = self._dispatch(task_ids, step, ahead=True)
        return self._collect(waiting, step)

    def _sync(self, model: Any, step: int, learned_at: int) -> None:
        """Sync the served copy if episodes it starts now, learned from at `learned_at`, would be too stale."""
        assert self.server is not None
        if learned_at - self.server.version > self.config.max_staleness:
            self.server.sync(model, step)

    def _dispatch(self, task_ids: list[str], step: int, ahead: bool = False) -> Dispatch:
        """Ask the launcher for one episode per entry of `task_ids` (a rollout batch per task)."""
        assert self.server is not None
        counts = Counter(task_ids)
        self.requests += 1
        emit(
            {
                "event": "episodes",
                "request": self.requests,
                "step": step + self.config.step_offset,
                "tasks": [[task_id, count] for task_id, count in counts.items()],
                "settings": {
                    "base_url": self.server.base_url,
                    "model": self.server.name,
                    "temperature": self.config.temperature,
                    "max_steps": int(self.config.environment.get("max_steps", 30)),
                    "max_new_tokens": self.config.max_new_tokens,
                    "sandbox": self.config.sandbox_backend or DEFAULT_BACKEND,
                    # Fresh samples each step and dispatch; the same ones for the same run and seed.
                    "seed": (self.config.seed * 1_000_003 + (step + self.config.step_offset) * 2 + ahead) % (2**31),
                },
                "wait_s": self.wait_s,
            },
            every_rank=True,
        )
        self.dispatched += len(task_ids)
        return Dispatch(self.requests, task_ids)

    def _collect(self, dispatch: Dispatch, step: int) -> list[Sample]:
        """Wait for the launcher's answer and read it as samples learned from at `step`, in the generation's order."""
        answer = self._answer(dispatch)
        if "error" in answer:
            raise TrainerError(str(answer["error"]))
        by_task: dict[str, list[Sample]] = {}
        for entry in answer.get("episodes") or []:
            sample = self._entry(entry, step)
            by_task.setdefault(sample.task_id, []).append(sample)
        samples = []
        for task_id in dispatch.task_ids:
            waiting = by_task.get(task_id) or []
            sample = waiting.pop(0) if waiting else self._missing(task_id)
            if sample.dropped:
                self.dropped[sample.dropped] += 1
            samples.append(sample)
        return samples

    def _answer(self, dispatch: Dispatch) -> dict[str, Any]:
        path = self.fleet_dir / f"{dispatch.request}.json"
        deadline = time.monotonic() + self.wait_s + 300.0  # the launcher gives up first, and says so
        while not path.exists():
            if time.monotonic() > deadline:
                raise TrainerError(f"the launcher did not answer fleet request {dispatch.request} in time")
            time.sleep(POLL_S)
        try:
            answer = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TrainerError(f"fleet request {dispatch.request}: unreadable answer: {exc}") from None
        path.unlink(missing_ok=True)
        return answer if isinstance(answer, dict) else {"error": "the launcher's answer is not an object"}

    def _cancel(self, dispatch: Dispatch) -> None:
        emit({"event": "episodes_cancel", "request": dispatch.request}, every_rank=True)

    def _entry(self, entry: dict[str, Any], step: int) -> Sample:
        from trajectories.interchange.episodes import EpisodeError, episode

        record = entry["record"]
        empty = Sample(record["trajectory_id"], record["task_id"], [self._eos], [self._eos], [0], [None])
        if entry.get("status") != "finished":
            empty.dropped = f"episode {entry.get('status')}"
            return empty
        try:
            shown = str(entry.get("statement") or ""), str(entry.get("language") or PYTHON)
            tokens = episode(self.tokenizer, record, *shown)
        except EpisodeError as exc:
            empty.dropped = f"not tokenizable: {exc}"
            return empty
        return self._sample(record, tokens, step)

    def _missing(self, task_id: str) -> Sample:
        return Sample("", task_id, [self._eos], [self._eos], [0], [None], dropped="episode missing")

    @property
    def _eos(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def _sample(self, record: dict[str, Any], tokens: dict[str, Any], step: int) -> Sample:
        limit = self.config.max_new_tokens
        response, mask, logprobs = tokens["response_ids"], tokens["loss_mask"], tokens.get("logprobs")
        truncated = len(response) > limit  # the whole episode's budget, as in the trainer's own episodes
        sample = Sample(
            record["trajectory_id"],
            record["task_id"],
            list(tokens["prompt_ids"]),
            list(response[:limit]) or [self._eos],
            list(mask[:limit]) or [0],
            list((logprobs or [None] * len(response))[:limit]) or [None],
            truncated=truncated,
            extra={"token_source": tokens.get("token_source"), "steps": len(record.get("steps") or [])},
        )
        versions = [
            policy_version((s.get(MODEL_CALL) or {}).get("system_fingerprint"))
            for s in record.get("steps") or []
            if isinstance(s.get(MODEL_CALL), dict)
        ]
        if not versions or any(v is None for v in versions):
            sample.dropped = "written by unknown weights"
            return sample
        sample.version = min(v for v in versions if v is not None)
        sample.staleness = step - sample.version
        reward = record.get("final_reward")
        if sample.staleness > self.config.max_staleness:
            sample.dropped = "staler than rl.max_staleness"
        elif not isinstance(reward, int | float):
            sample.dropped = "not scored"
        else:
            sample.reward = float(reward)
        return sample
