"""Verbs of the reward service: scoring trajectories and checking tasks' rewards."""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.vocabulary import ActionType, Termination
from rewards.anticheat import scan_commands
from rewards.learned import LearnedScoreError, apply_learned
from rewards.models import Reward, RewardSanity, ScoringFailure
from rewards.process import process_rewards
from rewards.sanity import check_task
from rewards.scoring import Score, add_flags, score_patch
from rewards.spec import RewardSpec, SpecError, load_spec
from tasks.models import Task
from tasks.services import task_spec_for
from trajectories.models import Step, Trajectory

logger = logging.getLogger(__name__)


ERROR_KEPT = 2000  # characters of a scoring failure's message kept on its row


class RewardError(ValueError):
    pass


def calibration_cache() -> Path:
    """Where each task's calibration of the reward's behaviour checks is kept (rewards.independence)."""
    return Path(settings.VAR_DIR) / "rewards" / "calibrations"


def probe_secret() -> bytes:
    """Keys the canaries and twins: stable across runs, unknown to the agent."""
    return hashlib.sha256(b"crucible-probes\0" + settings.SECRET_KEY.encode()).digest()


# What a verdict depends on: the task as it was, the patch, the spec, how the episode ended.
VerdictKey = tuple[str, str, str, str]


def score_trajectory(
    trajectory_id: str,
    spec: RewardSpec | None = None,
    backend: str | None = None,
    verdicts: dict[VerdictKey, Score] | None = None,
) -> Reward:
    """Score a trajectory's patch and steps once per spec version.

    The expensive part (running tests) happens outside any transaction; the write is
    one transaction, and a concurrent scorer that got there first simply wins. The
    sandbox is settings.CRUCIBLE_SANDBOX_BACKEND unless one is given. `verdicts` is a memo
    of the hidden tests' verdicts by (task version, patch, spec, termination) for a bulk run:
    the same patch of the same task gets the same verdict (nothing else reaches score_patch),
    while what depends on the steps (process rewards, reward models) is computed per trajectory.
    """
    spec = spec or active_spec()
    backend = backend or settings.CRUCIBLE_SANDBOX_BACKEND
    trajectory = Trajectory.objects.select_related("task").get(trajectory_id=trajectory_id)
    existing = Reward.objects.filter(trajectory=trajectory, spec_version=spec.version).first()
    if existing is not None:
        return existing
    if trajectory.task is None:
        raise RewardError(f"trajectory {trajectory_id}: task {trajectory.task_ref!r} is not in this database")
    started = time.monotonic()
    steps = list(
        trajectory.steps.order_by("step").values("id", "step", "action_type", "action_input", "observation", "extra")
    )
    termination = trajectory.termination or Termination.SUBMITTED
    key = (trajectory.task.version, hashlib.sha256(trajectory.patch.encode()).hexdigest(), spec.version, termination)
    known = verdicts.get(key) if verdicts is not None else None
    if known is None:
        known = score_patch(
            task_spec_for(trajectory.task),
            trajectory.patch,
            spec,
            backend,
            termination,
            secret=probe_secret(),
            calibration_cache=calibration_cache(),
        )
        if verdicts is not None:
            verdicts[key] = known
    score = copy.deepcopy(known)  # the memo's copy stays as the tests gave it
    per_step, process_flags = process_rewards([dict(s) for s in steps], spec)
    commands = [
        (s["step"], s["action_input"])
        for s in steps
        if s["action_type"] == ActionType.RUN_COMMAND and isinstance(s["action_input"], str)
    ]
    # What the steps show (git history mined, process findings) meets the spec's policies like
    # every flag of the verdict, before any reward model may shift what is left.
    add_flags(score, [*process_flags, *scan_commands(commands)], spec)
    try:
        # A reward model reads the whole trajectory; the hidden tests have already spoken.
        final, learned = apply_learned(
            spec,
            score.reward,
            score.resolved,
            bool(score.breakdown.get("test_run_valid")),
            list(score.breakdown.get("policies", [])),
            trajectory,
        )
    except LearnedScoreError as exc:
        raise RewardError(f"trajectory {trajectory_id}: {exc}") from None
    if learned:
        score.breakdown["learned"] = learned
        score.reward = final
    flags = [f.to_json() for f in score.flags]
    try:
        with transaction.atomic():
            reward = Reward.objects.create(
                trajectory=trajectory,
                spec_version=spec.version,
                reward=score.reward,
                resolved=score.resolved,
                pass_rate=score.pass_rate,
                tests=score.to_json()["tests"],
                flags=flags,
                breakdown=score.breakdown,
                process=[{"step": r.step, "reward": r.reward, "breakdown": r.breakdown} for r in per_step],
            )
            by_number = {s["step"]: s["id"] for s in steps}
            updates = [
                Step(id=by_number[r.step], reward=r.reward, reward_breakdown={**r.breakdown, "spec": spec.version})
                for r in per_step
                if r.step in by_number
            ]
            Step.objects.bulk_update(updates, ["reward", "reward_breakdown"], batch_size=1000)
            # The trajectory's outcome is the verified one, always with the spec that computed it:
            # curation and the rollout command wait on scored_at, and never read `claimed`.
            trajectory.final_reward, trajectory.success, trajectory.flags = score.reward, score.resolved, flags
            trajectory.scored_spec, trajectory.scored_at = spec.version, timezone.now()
            trajectory.save(update_fields=["final_reward", "success", "flags", "scored_spec", "scored_at"])
            ScoringFailure.objects.filter(trajectory=trajectory, spec_version=spec.version).delete()
    except IntegrityError:
        logger.info(
            "trajectory %s was scored under %s by another scorer first; keeping that reward",
            trajectory_id,
            spec.version,
        )
        return Reward.objects.get(trajectory=trajectory, spec_version=spec.version)
    logger.info(
        "trajectory %s scored under %s in %s in %.1f s: reward %s, %s, flags: %s",
        trajectory_id,
        spec.version,
        backend,
        time.monotonic() - started,
        reward.reward,
        "resolved" if reward.resolved else "not resolved",
        ", ".join(sorted({str(f.get("detector")) for f in flags})) or "none",
    )
    return reward


def record_scoring_failure(trajectory_id: str, spec_version: str, error: str) -> None:
    """Keep why scoring failed, for the trajectory's page (and so the sweep does not retry it blindly)."""
    trajectory = Trajectory.objects.filter(trajectory_id=trajectory_id).first()
    if trajectory is None:
        return
    with transaction.atomic():
        failure, created = ScoringFailure.objects.select_for_update().get_or_create(
            trajectory=trajectory, spec_version=spec_version, defaults={"error": error[:ERROR_KEPT]}
        )
        if not created:
            failure.error, failure.attempts = error[:ERROR_KEPT], failure.attempts + 1
            failure.save(update_fields=["error", "attempts", "updated_at"])


def check_reward_sanity(task: Task, spec: RewardSpec | None = None, backend: str | None = None) -> RewardSanity:
    spec = spec or active_spec()
    backend = backend or settings.CRUCIBLE_SANDBOX_BACKEND
    if not task.expected_patch.strip():
        raise RewardError(f"task {task.task_id} has no expected patch to check the reward against")
    result = check_task(task_spec_for(task), task.expected_patch, spec, backend)
    row, _ = RewardSanity.objects.update_or_create(
        task=task,
        spec_version=spec.version,
        defaults={
            "expected": result.expected,
            "empty": result.empty,
            "stubs": result.stubs,
            "gap": result.gap,
            "separates": result.separates,
        },
    )
    return row


def spec_from_option(path: str | None) -> RewardSpec:
    return load_spec(Path(path)) if path else active_spec()


def active_spec() -> RewardSpec:
    """The spec the reward service scores with: CRUCIBLE_REWARD_SPEC, or rewards/default_spec.yaml."""
    path = settings.CRUCIBLE_REWARD_SPEC
    try:
        return load_spec(Path(path)) if path else load_spec()
    except SpecError as exc:
        raise RewardError(f"CRUCIBLE_REWARD_SPEC: {exc}") from None
