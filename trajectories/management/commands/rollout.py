from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import redis
from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from kombu.exceptions import OperationalError
from tqdm import tqdm

from core.limits import MAX_NEW_TOKENS_DEFAULT, TOP_P_DEFAULT
from tasks.models import TaskSuite
from trajectories.batches import pending, start_batch
from trajectories.drive import drive_batch
from trajectories.exports import iter_trajectory_lines
from trajectories.models import RolloutBatch, Trajectory
from trajectories.options import add_rollout_arguments, checked_suite
from trajectories.rollout_settings import RolloutError, RolloutSettings
from trajectories.runner import run_trajectory
from trajectories.signals import trajectory_finished

# Scoring runs each trajectory's tests in a fresh sandbox on a `rewards` worker; a demo-sized
# batch takes seconds, a suite of real repositories minutes.
SCORE_POLL_SECONDS = 0.5
# Redis (the queue to the reward service) may restart under a long batch; the command waits
# for it, checking this often at first and backing off to REDIS_WAIT_MAX.
REDIS_WAIT_FIRST, REDIS_WAIT_MAX = 0.5, 5.0
REDIS_PING_S = 0.25
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError)
T = TypeVar("T")


class RedisWatch:
    """Pings Redis from a thread while the command runs, so that an outage is said on screen
    even while the main thread waits inside Celery's own reconnect loop (enqueuing a scoring
    job blocks until Redis is back), and so that the command knows one happened."""

    def __init__(self, url: str, say: Callable[[str], None]) -> None:
        self.where = url.rpartition("@")[2]
        self.client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        self.say = say
        self.outages = 0
        self.down_since: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-watch", daemon=True)

    def __enter__(self) -> RedisWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()

    def _run(self) -> None:
        while not self._stop.wait(REDIS_PING_S):
            try:
                self.client.ping()
            except REDIS_ERRORS as exc:
                self.down(exc)
            else:
                self.up()

    def down(self, exc: BaseException) -> None:
        with self._lock:
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.outages += 1
                self.say(f"waiting for Redis at {self.where} ({str(exc)[:200]}); will carry on when it is back")

    def up(self) -> None:
        with self._lock:
            if self.down_since is not None:
                self.say(f"Redis is back after {time.monotonic() - self.down_since:.1f} s; carrying on")
                self.down_since = None


class Command(BaseCommand):
    help = (
        "Sample trajectories for every task of a suite. "
        "Runs here, not on a worker; then waits for the reward service (a worker on the `rewards` queue) "
        "to score them and writes their JSONL with the scored rewards; run it again to resume after Ctrl-C."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_rollout_arguments(parser, policy_required=True)
        parser.add_argument("--samples", type=int, default=1)
        parser.add_argument("--top-p", type=float, default=TOP_P_DEFAULT)
        parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS_DEFAULT)
        parser.add_argument("--output-dir", type=Path, default=None)
        parser.add_argument(
            "--task", action="append", default=[], dest="tasks", metavar="TASK_ID", help="only this task (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        suite = checked_suite(options)
        out_dir: Path | None = options["output_dir"]
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        try:
            rollout = RolloutSettings.from_options(options)
            batch = self._resumable(suite, rollout, waits_for_scores=out_dir is not None, tasks=options["tasks"])
            if batch is None:
                batch = start_batch(suite, rollout, enqueue=False, task_ids=options["tasks"] or None)
            else:
                self.stdout.write(f"resuming batch {batch.pk}")
        except RolloutError as exc:
            raise CommandError(str(exc)) from None
        output = out_dir / f"batch-{batch.pk}.jsonl" if out_dir else None
        # Finished by an earlier run and still unscored: that run's scoring job was lost or failed.
        unscored_before = list(
            Trajectory.objects.filter(batch=batch, status=Trajectory.Status.FINISHED, scored_at=None)
        )
        interrupted = False
        self.redis = RedisWatch(django_settings.CELERY_BROKER_URL, self.stderr.write)

        def stop(signum: int, frame: object) -> None:
            nonlocal interrupted
            interrupted = True  # finish the current trajectory's bookkeeping, then stop

        previous = signal.signal(signal.SIGINT, stop)
        try:
            self.redis.__enter__()
            total = batch.trajectories.count()
            with tqdm(
                total=total,
                initial=total - len(pending(batch)),
                unit="traj",
                desc=f"batch {batch.pk}",
                disable=options["verbosity"] == 0,
                file=self.stderr._out,
            ) as bar:

                def progress(done: int, elsewhere: int) -> None:
                    bar.update(done - bar.n)
                    bar.set_postfix_str(f"{elsewhere} running elsewhere" if elsewhere else "", refresh=False)

                # Run again after a Redis outage: a trajectory that ended meanwhile is not
                # claimed twice, one cut short starts over (trajectories.progress.claim).
                drive_batch(
                    batch,
                    interrupted=lambda: interrupted,
                    on_progress=progress,
                    run=lambda pk: self._redis_retrying(partial(run_trajectory, pk), lambda: interrupted),
                )
            written = False
            if output is not None and not interrupted:
                if self.redis.outages:
                    # Scoring jobs enqueued before or during the outage may be gone with it.
                    unscored_before = list(
                        Trajectory.objects.filter(batch=batch, status=Trajectory.Status.FINISHED, scored_at=None)
                    )
                self._announce(unscored_before, lambda: interrupted)
                # The file a user gets carries the scored final_reward, success and flags, so it
                # is written only once the reward service has scored every finished trajectory.
                specs = self._wait_for_scores(
                    batch, options["score_timeout"], options["verbosity"], lambda: interrupted
                )
                if specs is not None:
                    self._write(batch, output)
                    written = True
                    self.stdout.write(f"scored under {', '.join(sorted(specs)) or '(no finished trajectory)'}")
        finally:
            self.redis.__exit__()
            signal.signal(signal.SIGINT, previous)
        left = len(pending(batch)) + batch.trajectories.filter(status=Trajectory.Status.RUNNING).count()
        where = f"; JSONL in {output}" if written else ""
        self.stdout.write(f"batch {batch.pk}: {batch.trajectories.count() - left} done, {left} left{where}")
        if interrupted:
            raise CommandError(f"interrupted: run the same command again to resume batch {batch.pk}")

    def _wait_for_scores(
        self, batch: RolloutBatch, timeout: float, verbosity: int, interrupted: Callable[[], bool]
    ) -> set[str] | None:
        """Wait until the reward service has scored every finished trajectory: the spec versions it
        used, or None when interrupted first.

        `trajectories` cannot ask the reward service (a higher layer), so it waits on what that
        service writes with each score: the trajectory's scored_at.
        """
        finished = Trajectory.objects.filter(batch=batch, status=Trajectory.Status.FINISHED)
        total = finished.count()
        deadline = time.monotonic() + timeout
        handled = self.redis.outages  # outages before this wait were handled by announcing again
        with tqdm(
            total=total, unit="traj", desc=f"scoring batch {batch.pk}", disable=verbosity == 0, file=self.stderr._out
        ) as bar:
            while True:
                scored = finished.exclude(scored_at=None).count()
                bar.update(scored - bar.n)
                if scored == total:
                    return set(finished.values_list("scored_spec", flat=True).distinct())
                if interrupted():
                    return None
                if self.redis.outages > handled and self.redis.down_since is None:
                    # Redis came back; what was queued for scoring may have gone with it.
                    handled = self.redis.outages
                    self._announce(list(finished.filter(scored_at=None)), interrupted)
                    deadline = max(deadline, time.monotonic() + timeout / 2)
                if time.monotonic() >= deadline:
                    raise CommandError(
                        f"the reward service scored {scored} of {total} finished trajectories of batch {batch.pk} "
                        f"within {timeout:g} s, so no JSONL was written (its rewards would be missing). Is a worker "
                        "on the `rewards` queue running? Its log says why a scoring failed. Run the same command "
                        "again to wait again."
                    )
                time.sleep(SCORE_POLL_SECONDS)

    def _announce(self, trajectories: list[Trajectory], interrupted: Callable[[], bool]) -> None:
        """Announce finished trajectories again, so that the reward service (idempotent per spec) scores them."""
        for trajectory in trajectories:
            self._redis_retrying(
                partial(trajectory_finished.send, sender=Trajectory, trajectory=trajectory), interrupted
            )

    def _redis_retrying(self, work: Callable[[], T], interrupted: Callable[[], bool]) -> T | None:
        """Run `work`; while Redis is away, wait for it with backoff and run it again. None when interrupted."""
        delay = REDIS_WAIT_FIRST
        while True:
            try:
                result = work()
            except REDIS_ERRORS as exc:
                self.redis.down(exc)
                if interrupted():
                    return None
                time.sleep(delay)
                delay = min(delay * 2, REDIS_WAIT_MAX)
                continue
            return result

    def _write(self, batch: RolloutBatch, output: Path) -> None:
        """The batch's finished trajectories as JSONL, written beside the target and renamed into place."""
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                finished = Trajectory.objects.filter(batch=batch, status=Trajectory.Status.FINISHED)
                for line in iter_trajectory_lines(finished):
                    fh.write(line)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would surprise a pipeline
            os.replace(tmp, output)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _resumable(
        self, suite: TaskSuite, rollout: RolloutSettings, *, waits_for_scores: bool, tasks: list[str]
    ) -> RolloutBatch | None:
        """The same command run again continues its unfinished batch instead of starting over."""
        same = RolloutBatch.objects.filter(suite=suite, **rollout.resolved().fields())
        same = same.exclude(status=RolloutBatch.Status.CANCELLED)
        wanted = set(tasks) if tasks else set(suite.tasks.values_list("task_id", flat=True))
        for batch in same.order_by("-created_at"):
            if set(batch.trajectories.values_list("task_ref", flat=True)) != wanted:
                continue  # a batch over other tasks of the suite (launched with --task) is not this command's
            # A batch whose scoring timed out is resumed too when JSONL is wanted: it is still to be written.
            unscored = waits_for_scores and (
                batch.trajectories.filter(status=Trajectory.Status.FINISHED, scored_at=None).exists()
            )
            if pending(batch) or unscored:
                return batch
        return None
