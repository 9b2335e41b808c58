from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.limits import MAX_NEW_TOKENS_DEFAULT, MAX_STEPS_DEFAULT, TEMPERATURE_DEFAULT
from core.vocabulary import DEFAULT_BACKEND, ISOLATING_BACKENDS, LAUNCHABLE_POLICIES, values
from tasks.models import TaskSuite
from trajectories.batches import RolloutError, pending, start_batch
from trajectories.exports import iter_trajectory_lines
from trajectories.models import RolloutBatch, Trajectory
from trajectories.runner import run_trajectory


class Command(BaseCommand):
    help = (
        "Sample trajectories for every task of a suite (the guide's sample_trajectories.py). "
        "Runs here, not on a worker; writes JSONL as it goes; run it again to resume after Ctrl-C."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--policy", required=True, choices=values(LAUNCHABLE_POLICIES))
        parser.add_argument("--model", default="", help="model dir (hf) or model name (openai)")
        parser.add_argument("--base-url", default="", help="OpenAI-compatible server (openai policy)")
        parser.add_argument("--samples", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=MAX_STEPS_DEFAULT)
        parser.add_argument("--temperature", type=float, default=TEMPERATURE_DEFAULT)
        parser.add_argument("--top-p", type=float, default=1.0)
        parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS_DEFAULT)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--sandbox", choices=values(ISOLATING_BACKENDS), default=DEFAULT_BACKEND.value)
        parser.add_argument("--output-dir", type=Path, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        suite = TaskSuite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['suite']!r}")
        out_dir: Path | None = options["output_dir"]
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "policy_kind": options["policy"],
            "samples": options["samples"],
            "temperature": options["temperature"],
            "top_p": options["top_p"],
            "max_steps": options["max_steps"],
            "sandbox": options["sandbox"],
            "seed": options["seed"],
            "base_url": options["base_url"],
            "max_new_tokens": options["max_new_tokens"],
        }
        batch = self._resumable(suite, options["model"], settings)
        try:
            if batch is None:
                batch = start_batch(suite, model=options["model"], enqueue=False, **settings)
            else:
                self.stdout.write(f"resuming batch {batch.pk}")
        except RolloutError as exc:
            raise CommandError(str(exc)) from None
        todo = pending(batch, stale_after=0)
        output = out_dir / f"batch-{batch.pk}.jsonl" if out_dir else None
        interrupted = False

        def stop(signum: int, frame: object) -> None:
            nonlocal interrupted
            interrupted = True  # finish the current trajectory's bookkeeping, then stop

        previous = signal.signal(signal.SIGINT, stop)
        try:
            with tqdm(
                total=batch.trajectories.count(),
                initial=batch.trajectories.count() - len(todo),
                unit="traj",
                desc=f"batch {batch.pk}",
                disable=options["verbosity"] == 0,
                file=self.stderr._out,
            ) as bar:
                for trajectory in todo:
                    if interrupted:
                        break
                    done = run_trajectory(trajectory.pk, stale_after=0)
                    if done is not None and output is not None and done.status == Trajectory.Status.FINISHED:
                        with output.open("ab") as fh:
                            for line in iter_trajectory_lines(Trajectory.objects.filter(pk=done.pk)):
                                fh.write(line)
                    bar.update(1)
        finally:
            signal.signal(signal.SIGINT, previous)
        left = len(pending(batch, stale_after=0))
        where = f"; JSONL in {output}" if output else ""
        self.stdout.write(f"batch {batch.pk}: {batch.trajectories.count() - left} done, {left} left{where}")
        if interrupted:
            raise CommandError(f"interrupted: run the same command again to resume batch {batch.pk}")

    def _resumable(self, suite: TaskSuite, model: str, settings: dict[str, Any]) -> RolloutBatch | None:
        """The same command run again continues its unfinished batch instead of starting over."""
        same = RolloutBatch.objects.filter(suite=suite, **settings).exclude(status=RolloutBatch.Status.CANCELLED)
        if model:
            same = same.filter(model=model)
        for batch in same.order_by("-created_at"):
            if pending(batch, stale_after=0):
                return batch
        return None
