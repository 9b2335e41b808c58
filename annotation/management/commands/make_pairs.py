from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.pairs import MAX_PAIRS, PairRequest, PairsError, draw_pairs
from core.vocabulary import ComparisonStrategy, values

# A refused request names its PairRequest field; the command answers with its own flag.
FLAGS = {"name": "--name", "max_pairs": "--max", "side_a": "--side-a and --side-b"}


class Command(BaseCommand):
    help = "Draw a comparison set: pairs of patches for the same task, for people to judge."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", required=True, help="the task suite the trajectories ran on")
        parser.add_argument("--batch", action="append", type=int, default=[], help="only this rollout batch (repeat)")
        parser.add_argument("--training-set", default="", help="only the trajectories of this training set")
        parser.add_argument("--strategy", required=True, choices=values(ComparisonStrategy))
        parser.add_argument("--max", dest="max_pairs", type=int, required=True, help=f"pairs at most (≤ {MAX_PAIRS})")
        parser.add_argument("--name", required=True, help="the set's name (a slug)")
        parser.add_argument("--reviewers", type=int, default=1, help="judgements wanted per pair (k)")
        parser.add_argument("--per-task", type=int, default=5, help="pairs per task at most")
        parser.add_argument("--side-a", default="", help="checkpoints: batch:ID or model:NAME")
        parser.add_argument("--side-b", default="", help="checkpoints: batch:ID or model:NAME")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--lock-seconds", type=int, default=600, help="how long a reviewer holds a pair")
        parser.add_argument("--json", action="store_true", help="print the set's stats as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        request = PairRequest(
            name=options["name"],
            suite=options["suite"],
            strategy=options["strategy"],
            max_pairs=options["max_pairs"],
            reviewers=options["reviewers"],
            per_task=options["per_task"],
            batches=tuple(options["batch"]),
            training_set=options["training_set"],
            side_a=options["side_a"],
            side_b=options["side_b"],
            seed=options["seed"],
            lock_seconds=options["lock_seconds"],
        )
        try:
            cset = draw_pairs(request)
        except PairsError as exc:
            flag = FLAGS.get(exc.field)
            raise CommandError(f"{flag}: {exc}" if flag else str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps({"set": cset.name, "source": cset.source, "stats": cset.stats}))
            return
        stats = cset.stats
        self.stdout.write(
            f"comparison set {cset.name}: {stats['pairs']} pairs over {stats['tasks_with_pairs']} tasks "
            f"({stats['candidates']} usable trajectories of {stats['trajectories']})"
        )
