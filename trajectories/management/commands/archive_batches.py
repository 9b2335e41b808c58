from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.objectstore import StoreError
from trajectories.archive import ArchiveError, archive_batch, due_for_archive, restore_batch
from trajectories.models import RolloutBatch


class Command(BaseCommand):
    help = (
        "Archive finished batches' steps to the object store (trajectories keep their summaries), "
        "by id or by the suites' retention rules; --restore brings a batch back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batches", nargs="*", type=int, help="batch ids to archive")
        parser.add_argument("--retention", action="store_true", help="archive every batch its suite's rule says is due")
        parser.add_argument("--restore", type=int, action="append", default=[], help="restore this batch (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not (options["batches"] or options["retention"] or options["restore"]):
            raise CommandError("name batch ids, --retention or --restore ID")
        try:
            for batch_id in options["restore"]:
                restored = restore_batch(self._batch(batch_id))
                self.stdout.write(f"batch {batch_id}: {restored} steps restored\n")
            batches = [self._batch(i) for i in options["batches"]]
            if options["retention"]:
                batches += due_for_archive()
            for batch in tqdm(batches, desc="archiving", unit="batch", disable=len(batches) < 2):
                result = archive_batch(batch)
                self.stdout.write(
                    f"batch {result.batch_id}: {result.steps} steps -> {result.key} ({result.bytes} bytes)\n"
                )
        except (ArchiveError, StoreError) as exc:
            raise CommandError(str(exc)) from None

    def _batch(self, batch_id: int) -> RolloutBatch:
        try:
            return RolloutBatch.objects.get(pk=batch_id)
        except RolloutBatch.DoesNotExist:
            raise CommandError(f"no batch {batch_id}") from None
