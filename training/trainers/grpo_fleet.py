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

The trainer process reaches the database for this (the launcher passes its settings on); the
rest of the trainer stays plain Python.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from training.trainers.common import TrainerConfig, TrainerError, log
from training.trainers.policy_server import PolicyServer, policy_version

POLL_S = 0.5
QUEUED_NOTICE_S = 60.0  # how long episodes may wait unclaimed before the log says no worker took them
TASK_KEY = "task_id"  # the user message of a fleet prompt names its task (GRPO rows are per task)


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()


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
    """Episodes started on the fleet: trajectory pk -> position in the generation."""

    positions: dict[int, int]
    task_ids: list[str]
    batches: list[int] = field(default_factory=list)


class Fleet:
    """TRL's rollout_func for fleet episodes; the policy server starts with the first generation."""

    def __init__(self, config: TrainerConfig, tokenizer: Any) -> None:
        setup_django()
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
        if waiting is None or len(waiting.positions) != len(task_ids):
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
        """Start one episode per entry of `task_ids` on the fleet: a rollout batch per task."""
        from trajectories.models import Trajectory

        by_task: dict[str, list[int]] = {}
        for index, task_id in enumerate(task_ids):
            by_task.setdefault(task_id, []).append(index)
        dispatch = Dispatch({}, task_ids)
        for number, (task_id, where) in enumerate(by_task.items()):
            batch = self._start(task_id, len(where), step, number, ahead)
            dispatch.batches.append(batch.pk)
            rows = Trajectory.objects.filter(batch=batch).order_by("sample_index").values_list("pk", flat=True)
            dispatch.positions.update(zip(rows, where, strict=True))
        self.dispatched += len(dispatch.positions)
        return dispatch

    def _collect(self, dispatch: Dispatch, step: int) -> list[Sample]:
        """Wait for a dispatch's episodes and read them as samples learned from at `step`, in its order."""
        pks = list(dispatch.positions)
        self._wait(pks, step)
        samples: list[Sample | None] = [None] * len(dispatch.task_ids)
        for pk, sample in self._samples(pks, step).items():
            samples[dispatch.positions[pk]] = sample
            if sample.dropped:
                self.dropped[sample.dropped] += 1
        assert all(s is not None for s in samples)
        return [s for s in samples if s is not None]

    def _cancel(self, dispatch: Dispatch) -> None:
        from trajectories.batches import cancel_batch
        from trajectories.models import RolloutBatch

        for batch in RolloutBatch.objects.filter(pk__in=dispatch.batches):
            cancel_batch(batch)

    def _start(self, task_id: str, samples: int, step: int, number: int, ahead: bool) -> Any:
        from core.vocabulary import PolicyKind
        from tasks.models import Task
        from trajectories.batches import start_batch
        from trajectories.rollout_settings import RolloutError, RolloutSettings

        assert self.server is not None
        task = Task.objects.select_related("suite").filter(task_id=task_id).order_by("-id").first()
        if task is None:
            raise TrainerError(f"fleet episodes need task {task_id!r} in Crucible's tasks; it is not there")
        try:
            settings = RolloutSettings(
                PolicyKind.OPENAI,
                self.server.name,
                base_url=self.server.base_url,
                samples=samples,
                temperature=self.config.temperature,
                max_steps=int(self.config.environment.get("max_steps", 30)),
                max_new_tokens=self.config.max_new_tokens,
                sandbox=self.config.sandbox_backend or _default_backend(),
                # Fresh samples each step, group and dispatch; the same ones for the same run and seed.
                seed=(self.config.seed * 1_000_003 + (step + self.config.step_offset) * 2018 + ahead * 1009 + number)
                % (2**31),
            )
            return start_batch(task.suite, settings, task_ids=[task_id])
        except RolloutError as exc:
            raise TrainerError(f"fleet episodes cannot start: {exc}") from None

    def _wait(self, pks: list[int], step: int) -> None:
        from trajectories.batches import cancel_batch
        from trajectories.models import RolloutBatch, Trajectory

        started = time.monotonic()
        noticed = False
        pending = set(pks)
        while pending:
            rows = Trajectory.objects.filter(pk__in=pending).values_list("pk", "status", "scored_at")
            queued = 0
            for pk, status, scored_at in rows:
                if status in (Trajectory.Status.FAILED, Trajectory.Status.CANCELLED) or scored_at is not None:
                    pending.discard(pk)
                queued += status == Trajectory.Status.QUEUED
            waited = time.monotonic() - started
            if queued == len(pks) and waited > QUEUED_NOTICE_S and not noticed:
                log(f"grpo fleet: step {step}: {queued} episodes queued for {waited:.0f} s; is a rollouts worker up?")
                noticed = True
            if pending and waited > self.wait_s:
                log(f"grpo fleet: step {step}: {len(pending)} episodes not done after {waited:.0f} s; cancelled")
                for batch in RolloutBatch.objects.filter(trajectories__pk__in=pending).distinct():
                    cancel_batch(batch)
                return
            if pending:
                time.sleep(POLL_S)

    def _samples(self, pks: list[int], step: int) -> dict[int, Sample]:
        from tasks.models import Task
        from trajectories.exports import iter_trajectory_lines
        from trajectories.interchange.episodes import EpisodeError, episode
        from trajectories.models import Trajectory

        queryset = Trajectory.objects.filter(pk__in=pks)
        meta = {str(t): (pk, status) for pk, t, status in queryset.values_list("pk", "trajectory_id", "status")}
        statements: dict[str, str] = {}
        found: dict[int, Sample] = {}
        for line in iter_trajectory_lines(queryset):
            record = json.loads(line)
            pk, status = meta[record["trajectory_id"]]
            task_id = record["task_id"]
            if task_id not in statements:
                statements[task_id] = (
                    Task.objects.filter(task_id=task_id).values_list("statement", flat=True).first() or ""
                )
            empty = self._empty(record, task_id)
            if status != Trajectory.Status.FINISHED:
                empty.dropped = f"episode {status}"
                found[pk] = empty
                continue
            try:
                tokens = episode(self.tokenizer, record, statements[task_id])
            except EpisodeError as exc:
                empty.dropped = f"not tokenizable: {exc}"
                found[pk] = empty
                continue
            found[pk] = self._sample(record, tokens, step)
        for pk in pks:  # a row the export did not yield (it cannot, short of a deleted row)
            if pk not in found:
                found[pk] = Sample("", "", [self._eos], [self._eos], [0], [None], dropped="episode missing")
        return found

    @property
    def _eos(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def _empty(self, record: dict[str, Any], task_id: str) -> Sample:
        return Sample(record["trajectory_id"], task_id, [self._eos], [self._eos], [0], [None])

    def _sample(self, record: dict[str, Any], tokens: dict[str, Any], step: int) -> Sample:
        from trajectories.schema import MODEL_CALL

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


def _default_backend() -> str:
    from sandbox.names import DEFAULT_BACKEND

    return DEFAULT_BACKEND
