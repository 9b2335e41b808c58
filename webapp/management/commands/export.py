"""`manage.py export KIND`: every kind of dataset Crucible hands to other tools, streamed.

It lives in the top layer because it reaches every app: tasks, trajectories, people's
preferences (annotation) and frozen training sets (training). The kinds and formats are
webapp.export_kinds', the same streams the API serves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.objectstore import ObjectStore, StoreError
from core.storage import object_store, store_and_key
from webapp.export_kinds import DIRECTORY, KINDS, Export, ExportError, ExportOptions, build_export
from webapp.export_store import stored_key, write_to_store

FORMATS = sorted({name for kind in KINDS.values() for name in kind.formats})
# How each option is spelled on the command line, for the error that refuses it.
FLAGS = {
    "suite": "--suite",
    "batch": "--batch",
    "set_name": "--set",
    "include_unfinished": "--include-unfinished",
    "keep_ties": "--keep-ties",
    "no_margin": "--no-margin",
    "tokenizer": "--tokenizer",
    "model_name": "--model-name",
}
NEEDS_SET = ("preferences", "training-set")


class Command(BaseCommand):
    help = (
        "Export tasks, trajectories, preference pairs (TRL) or a training set, streaming; the output "
        "appears only when complete. Formats: jsonl, parquet, hf (a Hugging Face datasets directory), "
        "tasks as swe-bench, taskdir or harbor (tars of task directories), trajectories as "
        "swe-bench-predictions or episodes (token ids, --tokenizer), training sets as sft (TRL)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=list(KINDS))
        parser.add_argument("--format", choices=FORMATS, default="jsonl")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--out",
            help="a file (a directory for --format hf), or s3://bucket/key (an hf export goes there as a tar)",
        )
        where.add_argument(
            "--to-store",
            action="store_true",
            help="into the configured object store (CRUCIBLE_STORAGE_URL), as exports/KIND/ID-FORMAT.EXT",
        )
        parser.add_argument("--suite", default=None, help="tasks, trajectories: only this suite")
        parser.add_argument("--batch", type=int, default=None, help="trajectories: only this rollout batch")
        parser.add_argument(
            "--set", dest="set_name", default=None, help="preferences: comparison set; training-set: NAME[@VERSION]"
        )
        parser.add_argument(
            "--include-unfinished",
            action="store_true",
            help="trajectories: also queued, running, failed and cancelled ones",
        )
        parser.add_argument("--keep-ties", action="store_true", help="preferences: keep tie and both-bad verdicts")
        parser.add_argument("--no-margin", action="store_true", help="preferences: leave out the margin column")
        parser.add_argument("--tokenizer", default=None, help="trajectories --format episodes: a tokenizer directory")
        parser.add_argument(
            "--model-name", default=None, help="trajectories --format swe-bench-predictions: model_name_or_path"
        )
        parser.add_argument(
            "--unredacted",
            action="store_true",
            help="leave secrets and personal data in (the export and the audit log say so)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        what, format_name = options["what"], options["format"]
        kind = KINDS[what]
        if format_name not in kind.formats:
            raise CommandError(f"{what} export only as {' or '.join(kind.formats)}")
        for option, flag in FLAGS.items():
            if options[option] not in (None, False) and option not in kind.options:
                raise CommandError(f"{flag} does not apply to a {what} export")
        if what in NEEDS_SET and not options["set_name"]:
            raise CommandError(f"export {what} needs --set NAME")
        target = self._target(options["out"])
        export_options = ExportOptions(
            suite=options["suite"],
            batch=options["batch"],
            set_name=options["set_name"],
            include_unfinished=options["include_unfinished"],
            keep_ties=options["keep_ties"],
            no_margin=options["no_margin"],
            tokenizer=options["tokenizer"],
            model_name=options["model_name"],
            unredacted=options["unredacted"],
        )
        try:
            export = build_export(what, format_name, export_options)
            with tqdm(
                total=export.total,
                unit=export.unit,
                desc="exporting",
                disable=options["verbosity"] == 0,
                file=self.stderr._out,
            ) as bar:
                if isinstance(target, Path):
                    if export.shape == DIRECTORY and export.format == "hf":
                        _write_directory(export, target, bar)
                    else:
                        _write_file(export, target, bar)
                    written = str(target)
                else:
                    store, key = target if target is not None else (object_store(), stored_key(export))
                    stored = write_to_store(_progress(export.stream(), export, bar), store, key)
                    written = f"{store.url}/{stored.key} ({stored.bytes} bytes, sha256 {stored.sha256})"
        except ExportError as exc:
            flag = FLAGS.get(exc.option, f"--{exc.option}") if exc.option else ""
            raise CommandError(f"{flag}: {exc}" if flag else str(exc)) from None
        except StoreError as exc:
            raise CommandError(f"the export was not stored: {exc}") from None
        refused = "".join(f", {count} refused ({reason.replace('_', ' ')})" for reason, count in export.refused.items())
        self.stdout.write(f"{export.tally.count} {export.noun} written to {written}{refused}")

    def _target(self, out: str | None) -> Path | tuple[ObjectStore, str] | None:
        """A local path, an explicit bucket and key, or None for the configured store (--to-store)."""
        if out is None:
            return None
        if out.startswith("s3://"):
            try:
                return store_and_key(out)
            except StoreError as exc:
                raise CommandError(str(exc)) from None
        path = Path(out)
        if not path.parent.is_dir():
            raise CommandError(f"{path.parent}: no such directory")
        return path


def _progress(pieces: Iterator[Any], export: Export, bar: tqdm[Any]) -> Iterator[Any]:
    for piece in pieces:
        yield piece
        bar.update(export.tally.count - bar.n)


def _finish(tmp: Path, out: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, (0o777 if tmp.is_dir() else 0o666) & ~umask)  # mkstemp's 0600 would surprise a pipeline
    if out.is_dir() and tmp.is_dir():
        shutil.rmtree(out)
    os.replace(tmp, out)


def _write_file(export: Export, out: Path, bar: tqdm[Any]) -> None:
    # Written beside the target and renamed, so a crash never leaves half a file
    # under the name a pipeline will read.
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in _progress(export.stream(), export, bar):
                fh.write(piece)
        _finish(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_directory(export: Export, out: Path, bar: tqdm[Any]) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a directory", "out")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        assert export.files is not None
        for name, content, _mode in _progress(export.files, export, bar):
            (tmp / name).write_bytes(content)
        _finish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
