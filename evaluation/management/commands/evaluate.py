from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from evaluation.models import EvalRun
from evaluation.services import (
    EvalError,
    cancel_eval,
    design_report,
    eval_settings,
    parse_k,
    progress,
    ready,
    refresh_eval,
    start_eval,
)
from training.models import Checkpoint
from trajectories.drive import drive_batch
from trajectories.options import add_rollout_arguments, checked_suite
from trajectories.runner import run_trajectory

SCORE_POLL_SECONDS = 0.5


class Command(BaseCommand):
    help = (
        "pass@k of a policy or checkpoint on an eval suite isolated from training. Refuses a suite that overlaps "
        "training data unless --force. Samples here, as `rollout` does, then waits for the reward service "
        "(a worker on the `rewards` queue) to score every sample: only verified successes count."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_rollout_arguments(parser, policy_required=False)
        parser.add_argument("--checkpoint", type=int, default=None, help="a training checkpoint's id (runs as hf)")
        parser.add_argument("--k", default="1", help="comma-separated k values, e.g. 1,5")
        parser.add_argument("--samples", type=int, default=None, help="n per task (default: the largest k)")
        parser.add_argument("--force", action="store_true", help="run despite a train/eval overlap (recorded)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        suite = checked_suite(options)
        checkpoint = None
        if options["checkpoint"] is not None:
            checkpoint = Checkpoint.objects.filter(pk=options["checkpoint"]).first()
            if checkpoint is None:
                raise CommandError(f"no checkpoint with id {options['checkpoint']}")
        elif options["policy"] is None:
            raise CommandError("give --policy (or --checkpoint)")
        try:
            k_values = parse_k(options["k"])
            rollout = eval_settings(options, k_values, checkpoint)
            run = start_eval(
                suite, rollout, k_values=k_values, checkpoint=checkpoint, force=options["force"], enqueue=False
            )
        except EvalError as exc:
            raise CommandError(str(exc)) from None
        if run.warning:
            self.stderr.write(f"WARNING: {run.warning}")
        assert run.batch is not None
        quiet = options["verbosity"] == 0 or options["json"]
        batch = run.batch
        try:
            with tqdm(
                total=batch.trajectories.count(),
                unit="traj",
                desc=f"eval {run.pk}",
                disable=quiet,
                file=self.stderr._out,
            ) as bar:
                drive_batch(
                    batch,
                    on_progress=lambda done, elsewhere: bar.update(done - bar.n),
                    run=lambda pk: run_trajectory(pk),
                )
        except KeyboardInterrupt:
            # A half-sampled run must not later finish with a pass@k over whichever samples ran.
            cancel_eval(run)
            raise CommandError(f"interrupted: eval run {run.pk} cancelled") from None
        run = self._wait(run, options["score_timeout"], quiet)
        if options["json"]:
            self.stdout.write(json.dumps(design_report(run)))
            return
        self.stdout.write(f"eval run {run.pk} on {suite.name} ({run.policy_kind}:{run.model}), n={run.samples}")
        for k, value in run.results["pass_at_k"].items():
            lo, hi = run.results["ci95"][k]
            self.stdout.write(
                f"  pass@{k} = {value:.3f}  (95% CI {lo:.3f}-{hi:.3f})  pass^{k} = {run.results['pass_hat_k'][k]:.3f}"
            )
        adversarial = run.results.get("adversarial")
        if adversarial and adversarial["cheat_rate"] is not None:
            lo, hi = adversarial.get("cheat_rate_ci95") or (adversarial["cheat_rate"], adversarial["cheat_rate"])
            self.stdout.write(
                f"  cheat rate on adversarial tasks: {adversarial['cheat_rate']:.1%} (95% CI {lo:.1%}-{hi:.1%}; "
                f"{adversarial['cheats']} of {adversarial['samples']} samples)"
            )
        if run.warning:
            # Repeated beside the numbers: the warning printed at the start may be long gone.
            self.stdout.write(f"  WARNING: {run.warning}")

    def _wait(self, run: EvalRun, timeout: float, quiet: bool) -> EvalRun:
        """Wait until the reward service has scored every finished sample, then compute pass@k."""
        deadline = time.monotonic() + timeout
        counts = progress(run)
        with tqdm(
            total=counts["finished"], unit="traj", desc=f"scoring eval {run.pk}", disable=quiet, file=self.stderr._out
        ) as bar:
            while not ready(counts):
                bar.update(counts["scored"] - bar.n)
                if time.monotonic() >= deadline:
                    raise CommandError(
                        f"the reward service scored {counts['scored']} of {counts['finished']} samples of eval run "
                        f"{run.pk} within {timeout:g} s. Is a worker on the `rewards` queue running? The run stays "
                        f"open: its page (/evaluation/{run.pk}/) finishes it once the scores arrive."
                    )
                time.sleep(SCORE_POLL_SECONDS)
                counts = progress(run)
            bar.update(counts["scored"] - bar.n)
        return refresh_eval(run)
