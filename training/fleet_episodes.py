"""The launcher's half of GRPO fleet episodes: it starts the rollout batches a trainer asks for and
hands the scored episodes back.

The trainer is plain Python (no database: training.trainers.grpo_fleet). For each generation it
prints an `episodes` event: the tasks and how many episodes of each, its policy server's URL and
the sampling settings. The launcher, which follows the trainer's output, starts one rollout batch
per task (the `rollouts` workers run them, the reward service scores them, as any batch), watches
them, and when every episode has ended and been scored writes them to `FLEET_DIR/<request>.json`
(atomically), where the trainer waits for it. A request that cannot start (a task Crucible does
not have, settings out of range, a server not allowed) gets a file with the error instead.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.vocabulary import PolicyKind
from tasks.models import Task
from trajectories.batches import cancel_batch, start_batch
from trajectories.exports import TaskPrompts, iter_trajectory_lines
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutError, RolloutSettings

logger = logging.getLogger(__name__)

FLEET_DIR_ENV = "CRUCIBLE_FLEET_DIR"  # where the trainer finds the answers (the run directory's fleet/)
MAX_TASKS = 1024  # tasks in one request
MAX_WAIT_S = 24 * 3600.0
QUEUED_NOTICE_S = 60.0
SETTINGS = ("temperature", "max_steps", "max_new_tokens", "sandbox", "seed")
LINK_FIELDS = ("policy_version", "staleness", "truncated")  # what a fleet episode's link records


class RequestError(ValueError):
    pass


@dataclass
class FleetRequest:
    """One generation's episodes, started and not yet handed back."""

    number: int
    out: Path
    deadline: float
    batches: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    noticed: bool = False


class Requests:
    """A launcher's fleet requests: started, watched between the trainer's lines, answered or cancelled."""

    def __init__(self) -> None:
        self.directory: Path | None = None  # the run directory's fleet/, once the launch staged it
        self.pending: dict[int, FleetRequest] = {}

    def start(self, event: dict[str, Any]) -> str:
        """Start what an `episodes` event asks for; a line for the run's log."""
        if self.directory is None:
            raise ValueError("no fleet directory: this launch did not stage a run directory")
        request = start(self.directory, event)
        if request is None:
            return f"fleet request {event.get('request')}: refused (the trainer is told why)"
        self.pending[request.number] = request
        return f"fleet request {request.number}: {len(request.batches)} batch(es) started"

    def cancel(self, number: int) -> None:
        request = self.pending.pop(number, None)
        if request is not None:
            cancel(request)

    def tick(self) -> list[str]:
        """Answer the requests whose episodes are all done and scored; notices for the run's log."""
        notices = []
        for number, request in list(self.pending.items()):
            noticed = request.noticed
            if poll(request):
                del self.pending[number]
            if request.noticed and not noticed:  # on the run page too, not only in the worker's log
                notices.append(f"fleet request {number}: no rollouts worker has taken its episodes yet")
        return notices

    def stop(self) -> None:
        """The trainer is gone: what it asked for and never collected is cancelled."""
        for request in self.pending.values():
            cancel(request)
        self.pending.clear()


def link(run_pk: int, step: int, event: dict[str, Any]) -> None:
    """A fleet episode is a stored, scored rollout already: it is linked to the run (listed with its
    rollouts), with the step that learned from it, its policy version and staleness; never copied."""
    try:
        trajectory_id = uuid.UUID(str(event.get("trajectory_id")))
    except ValueError:
        return  # an episode the fleet never stored (grpo_fleet's "episode missing")
    fields = {key: event.get(key) for key in LINK_FIELDS if isinstance(event.get(key), int | bool)}
    found = Trajectory.objects.filter(trajectory_id=trajectory_id, source=Trajectory.Source.ONLINE, batch__isnull=False)
    episode = found.first()
    if episode is not None and "training_run" not in episode.extra:
        episode.extra = {
            **episode.extra,
            "training_run": run_pk,
            "step": step,
            "mode": "agent",
            "episodes": "fleet",
            **fields,
            "dropped": str(event.get("dropped") or "")[:200],
        }
        episode.save(update_fields=["extra"])


def start(fleet_dir: Path, event: dict[str, Any]) -> FleetRequest | None:
    """Start the batches an `episodes` event asks for; None when it could not start (the answer says why)."""
    number = event.get("request")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 10**9:
        raise ValueError("an episodes event needs a whole request number")
    out = fleet_dir / f"{number}.json"
    wait = event.get("wait_s")
    wait_s = float(wait) if isinstance(wait, int | float) and not isinstance(wait, bool) else 3600.0
    request = FleetRequest(number, out, time.monotonic() + min(max(wait_s, 1.0), MAX_WAIT_S))
    try:
        for task, settings in _batches(event):
            request.batches.append(start_batch(task.suite, settings, task_ids=[task.task_id]).pk)
    except (RequestError, RolloutError) as exc:  # RolloutError: start_batch's own checks (the server allowed)
        cancel(request)
        _write(out, {"error": str(exc)})
        return None
    return request


def _batches(event: dict[str, Any]) -> list[tuple[Task, RolloutSettings]]:
    tasks, given = event.get("tasks"), event.get("settings")
    if not isinstance(tasks, list) or not 0 < len(tasks) <= MAX_TASKS or not isinstance(given, dict):
        raise RequestError(f"an episodes request names 1 to {MAX_TASKS} tasks and its settings")
    found = []
    for entry in tasks:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and type(entry[1]) is int):
            raise RequestError("each task of an episodes request is [task_id, count]")
        task_id, count = entry
        task = Task.objects.select_related("suite").filter(task_id=task_id).order_by("-id").first()
        if task is None:
            raise RequestError(f"fleet episodes need task {task_id[:200]!r} in Crucible's tasks; it is not there")
        try:
            settings = RolloutSettings(
                PolicyKind.OPENAI,
                str(given.get("model", "")),
                base_url=str(given.get("base_url", "")),
                samples=count,
                **{key: given[key] for key in SETTINGS if key in given},
            )
        except (RolloutError, TypeError) as exc:
            raise RequestError(f"fleet episodes cannot start: {exc}") from None
        found.append((task, settings))
    return found


def poll(request: FleetRequest) -> bool:
    """Hand the episodes back once every one has ended and been scored (or the wait ran out); True when done."""
    rows = list(Trajectory.objects.filter(batch_id__in=request.batches).values_list("status", "scored_at"))
    stopped = (Trajectory.Status.FAILED, Trajectory.Status.CANCELLED)
    ended = sum(1 for status, scored in rows if status in stopped or scored)
    queued = sum(1 for status, _ in rows if status == Trajectory.Status.QUEUED)
    waited = time.monotonic() - request.started
    if queued == len(rows) and waited > QUEUED_NOTICE_S and not request.noticed:
        logger.warning(
            "fleet request %s: %d episodes queued for %.0f s; is a rollouts worker up?", request.number, queued, waited
        )
        request.noticed = True
    if ended < len(rows) and time.monotonic() < request.deadline:
        return False
    if ended < len(rows):
        logger.warning("fleet request %s: %d episodes not done in time; cancelled", request.number, len(rows) - ended)
        cancel(request)
    _write(request.out, {"episodes": episodes(request.batches)})
    return True


def episodes(batch_ids: list[int]) -> list[dict[str, Any]]:
    """The batches' trajectories as exported (final reward as scored), with their status and statement."""
    queryset = Trajectory.objects.filter(batch_id__in=batch_ids)
    known = {str(t): (s, i) for t, s, i in queryset.values_list("trajectory_id", "status", "sample_index")}
    prompts = TaskPrompts()
    found = []
    for line in iter_trajectory_lines(queryset):
        record = json.loads(line)
        status, sample = known[record["trajectory_id"]]
        shown = {"statement": prompts(record), "language": prompts.language(record)}
        found.append({"status": status, "sample": sample, **shown, "record": record})
    return sorted(found, key=lambda e: (e["record"]["task_id"], e["sample"] or 0))


def cancel(request: FleetRequest) -> None:
    for batch in RolloutBatch.objects.filter(pk__in=request.batches):
        cancel_batch(batch)


def _write(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(payload))
    os.replace(partial, path)  # the trainer never reads half an answer
