"""One export layer: every kind x format as a stream, for the `export` command and the API alike.

`build_export(kind, format, options, user)` checks the request and returns an `Export`: a
generator of bytes (file formats) or of files (directory formats: a Hugging Face dataset, the
task-directory tarball), which the command writes to disk and the API streams. Rows are read
in chunks (keyset paging, fetchmany), so memory holds one chunk whatever the export's size.

Every record goes through redaction on its way out (webapp.export_redaction), unless an admin
asked for the data unredacted; the export says which in its first record or its metadata, and
the audit log gets one EXPORT event with the count once the stream ends (or is cut off).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db.models import QuerySet

from annotation import preferences
from annotation.models import ComparisonSet
from annotation.preferences import iter_preference_rows, parquet_schema
from core.audit import AuditAction, record_redactions
from core.audit import record as audit
from tasks.exports import TaskExportError, iter_tasks, swebench_instance, task_record, taskdir_files
from tasks.harbor import harbor_files
from tasks.models import Task, TaskSuite
from training.queries import export_lines, find_training_set
from trajectories.conversation import TOOLS, RecordedStep, conversation
from trajectories.exports import ExportLine, TaskPrompts, finished_only, iter_trajectory_lines_redacted_with
from trajectories.interchange.episodes import EpisodeError, episode, load_tokenizer
from trajectories.interchange.predictions import prediction
from trajectories.interchange.subagents import atif_documents
from trajectories.models import Trajectory
from webapp import export_formats as fmt
from webapp.export_formats import FilePiece
from webapp.export_redaction import (
    UNREDACTED_MARK,
    Tally,
    mark_at_root,
    mark_in_extra,
    marked,
    redact_file,
    redacted_lines,
    redacted_rows,
)
from webapp.export_schemas import (
    sft_columns,
    sft_schema,
    task_columns,
    task_schema,
    trajectory_columns,
    trajectory_schema,
)

FILE, DIRECTORY = "file", "directory"


class ExportError(ValueError):
    """A request for an export that cannot be made: one line, said before any byte is written.

    `option` is the part of the request at fault, when one is: an ExportOptions field, "format"
    or "kind". Each caller names it as its users type it (the API's query parameter, the
    command's flag), so the message itself says what is wrong, not what the thing is called.
    """

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class ExportOptions:
    suite: str | None = None
    batch: int | None = None
    set_name: str | None = None
    include_unfinished: bool = False
    keep_ties: bool = False
    no_margin: bool = False
    tokenizer: str | None = None
    model_name: str | None = None
    unredacted: bool = False


@dataclass
class Export:
    kind: str
    format: str
    shape: str  # FILE or DIRECTORY
    total: int | None
    unit: str
    noun: str
    filename: str
    content_type: str
    redacted: bool
    pieces: Iterator[bytes] | None = None
    files: Iterator[FilePiece] | None = None
    tally: Tally = field(default_factory=Tally)
    # Rows the kind refused to write, by reason (a preference pair whose sides render the same).
    refused: Counter[str] = field(default_factory=Counter)

    def stream(self) -> Iterator[bytes]:
        """The bytes of the export: the file, or a tar of the directory."""
        if self.pieces is not None:
            return self.pieces
        assert self.files is not None
        return fmt.tar(self.files, self.filename.removesuffix(".tar"))


# --- rows ---------------------------------------------------------------------------------


def _suite(options: ExportOptions) -> str | None:
    if options.suite is not None and not TaskSuite.objects.filter(name=options.suite).exists():
        raise ExportError(f"no suite named {options.suite!r}", "suite")
    return options.suite


def _trajectory_queryset(options: ExportOptions) -> QuerySet[Trajectory]:
    suite = _suite(options)
    qs = Trajectory.objects.all() if suite is None else Trajectory.objects.filter(suite__name=suite)
    if options.batch is not None:
        qs = qs.filter(batch_id=options.batch)
    return qs if options.include_unfinished else finished_only(qs)


def _records(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        yield orjson.loads(line)


def _training_set(options: ExportOptions) -> Any:
    if not options.set_name:
        raise ExportError("a training-set export needs the training set's NAME or NAME@VERSION", "set_name")
    try:
        found = find_training_set(options.set_name)
    except ValueError as exc:
        raise ExportError(str(exc), "set_name") from None
    if found is None:
        raise ExportError(f"no training set {options.set_name!r}", "set_name")
    return found


def _sft_rows(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """TRL's conversational format with tool calls: `messages` and `tools`, plus lineage."""
    prompts = TaskPrompts()
    for record in records:
        steps = (
            RecordedStep(s["action_type"], s["action_input"], s.get("thought") or "", s.get("observation") or "")
            for s in record["steps"]
        )
        yield {
            "messages": conversation(prompts(record), steps, prompts.language(record)),
            "tools": TOOLS,
            "trajectory_id": record["trajectory_id"],
            "task_id": record["task_id"],
            "final_reward": record.get("final_reward"),
            "success": record.get("success"),
        }


def _episodes(records: Iterable[dict[str, Any]], tokenizer: Any) -> Iterator[dict[str, Any]]:
    prompts = TaskPrompts()
    for record in records:
        yield episode(tokenizer, record, prompts(record), prompts.language(record))


# --- the table of kinds x formats ----------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """What a kind yields before formatting: records, how many (when cheap to know), and names."""

    rows: Iterator[dict[str, Any]]
    total: int | None
    unit: str
    noun: str
    where: str  # the redaction path prefix
    # The same records as JSONL lines, when the kind reads them so (trajectories): a JSONL export
    # then passes a line on as it is unless redaction has something to replace in it.
    # Each line comes with the redaction rules version its trajectory was imported under.
    lines: Iterator[ExportLine] | None = None
    refused: Counter[str] = field(default_factory=Counter)  # filled as `rows` is read


def trajectory_rows(options: ExportOptions) -> Rows:
    qs = _trajectory_queryset(options)
    lines = iter_trajectory_lines_redacted_with(qs)
    return Rows(_records(line.line for line in lines), qs.count(), "traj", "trajectories", "trajectory", lines)


def training_set_rows(options: ExportOptions) -> Rows:
    found = _training_set(options)
    lines = (ExportLine(line, "") for line in export_lines(found))
    return Rows(
        _records(line.line for line in lines), len(found.trajectory_ids), "traj", "trajectories", "trajectory", lines
    )


def task_rows(options: ExportOptions) -> Rows:
    suite = _suite(options)
    tasks = Task.objects.all() if suite is None else Task.objects.filter(suite__name=suite)
    return Rows((task_record(t) for t in iter_tasks(tasks)), tasks.count(), "task", "tasks", "task")


def preference_rows(options: ExportOptions) -> Rows:
    if not options.set_name:
        raise ExportError("a preferences export needs the name of a comparison set", "set_name")
    comparison_set = ComparisonSet.objects.filter(name=options.set_name).first()
    if comparison_set is None:
        raise ExportError(f"no comparison set named {options.set_name!r}", "set_name")
    refused: Counter[str] = Counter()
    rows = iter_preference_rows(
        comparison_set, keep_ties=options.keep_ties, margin=not options.no_margin, refused=refused
    )
    return Rows(rows, None, "pair", "preference pairs", "preference", refused=refused)


Layout = Callable[[Rows, ExportOptions], Rows]


def _same(rows: Rows, options: ExportOptions) -> Rows:
    return rows


def _as_sft(rows: Rows, options: ExportOptions) -> Rows:
    return Rows(_sft_rows(rows.rows), rows.total, rows.unit, "conversations", "conversation")


def _as_predictions(rows: Rows, options: ExportOptions) -> Rows:
    made = (prediction(r, options.model_name) for r in rows.rows)
    return Rows(made, rows.total, rows.unit, "predictions", "prediction")


def _as_atif(rows: Rows, options: ExportOptions) -> Rows:
    # A subagent goes out inside its parent's document, not as one of its own.
    return Rows(atif_documents(rows.rows, TaskPrompts()), rows.total, rows.unit, "ATIF trajectories", "trajectory")


def _as_episodes(rows: Rows, options: ExportOptions) -> Rows:
    if not options.tokenizer:
        raise ExportError("an episodes export needs a tokenizer to count tokens with", "tokenizer")
    try:
        tokenizer = load_tokenizer(options.tokenizer)
    except EpisodeError as exc:
        raise ExportError(str(exc), "tokenizer") from None
    return Rows(_episodes(rows.rows, tokenizer), rows.total, rows.unit, "episodes", "episode")


def _as_swebench(rows: Rows, options: ExportOptions) -> Rows:
    suite = _suite(options)
    tasks = Task.objects.all() if suite is None else Task.objects.filter(suite__name=suite)
    return Rows((swebench_instance(t) for t in iter_tasks(tasks)), rows.total, rows.unit, "instances", "instance")


def _as_taskdir(rows: Rows, options: ExportOptions) -> Rows:
    suite = _suite(options)
    tasks = Task.objects.all() if suite is None else Task.objects.filter(suite__name=suite)
    light = tasks.order_by("id").values("pk", "task_id", "statement", "metadata", "expected_patch")
    return Rows(
        (dict(row) for row in light.iterator(chunk_size=200)), rows.total, rows.unit, "task directories", "task"
    )


@dataclass(frozen=True)
class Format:
    layout: Layout
    encoding: str  # jsonl | parquet | hf | taskdir | harbor
    schema: Callable[[ExportOptions], Any] | None = None
    columns: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Rows per Parquet row group, read when the export starts.
    group_rows: Callable[[], int] = lambda: fmt.ROW_GROUP_ROWS
    # Where an unredacted JSONL export says so in its first record.
    unredacted_mark: Callable[[dict[str, Any]], dict[str, Any]] = mark_at_root


def _preference_schema(options: ExportOptions) -> Any:
    return parquet_schema(not options.no_margin)


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    return row


@dataclass(frozen=True)
class Kind:
    rows: Callable[[ExportOptions], Rows]
    formats: dict[str, Format]
    options: frozenset[str]  # the ExportOptions fields that mean something for this kind


def _columnar(
    layout: Layout, schema: Callable[[ExportOptions], Any], columns: Any, group_rows: Callable[[], int] | None = None
) -> dict[str, Format]:
    return {
        "parquet": Format(layout, "parquet", schema, columns, group_rows or (lambda: fmt.ROW_GROUP_ROWS)),
        "hf": Format(layout, "hf", schema, columns),
    }


KINDS: dict[str, Kind] = {
    "trajectories": Kind(
        trajectory_rows,
        {
            "jsonl": Format(_same, "jsonl"),
            **_columnar(_same, lambda o: trajectory_schema(), trajectory_columns),
            "swe-bench-predictions": Format(_as_predictions, "jsonl"),
            "episodes": Format(_as_episodes, "jsonl"),
            # One ATIF document per line (trajectories.interchange.atif).
            "atif": Format(_as_atif, "jsonl", unredacted_mark=mark_in_extra),
        },
        frozenset({"suite", "batch", "include_unfinished", "tokenizer", "model_name"}),
    ),
    "tasks": Kind(
        task_rows,
        {
            "jsonl": Format(_same, "jsonl"),
            "swe-bench": Format(_as_swebench, "jsonl"),
            "taskdir": Format(_as_taskdir, "taskdir"),
            # The same directories as Harbor reads them (tasks.harbor); `encoding` picks the writer.
            "harbor": Format(_as_taskdir, "harbor"),
            **_columnar(_same, lambda o: task_schema(), task_columns),
        },
        frozenset({"suite"}),
    ),
    "preferences": Kind(
        preference_rows,
        {
            "jsonl": Format(_same, "jsonl"),
            **_columnar(_same, _preference_schema, _identity, lambda: preferences.PARQUET_ROWS),
        },
        frozenset({"set_name", "keep_ties", "no_margin"}),
    ),
    "training-set": Kind(
        training_set_rows,
        {
            "jsonl": Format(_same, "jsonl"),
            "sft": Format(_as_sft, "jsonl"),
            **_columnar(_as_sft, lambda o: sft_schema(), sft_columns),
        },
        frozenset({"set_name"}),
    ),
}
# Which options only some formats take.
FORMAT_OPTIONS = {"tokenizer": ("episodes",), "model_name": ("swe-bench-predictions",)}
EXTENSIONS = {"jsonl": ".jsonl", "parquet": ".parquet", "hf": ".tar", "taskdir": ".tar", "harbor": ".tar"}
CONTENT_TYPES = {
    "jsonl": "application/jsonl",
    "parquet": "application/vnd.apache.parquet",
    "hf": "application/x-tar",
    "taskdir": "application/x-tar",
    "harbor": "application/x-tar",
}


def check_request(kind: str, format_name: str, given: set[str]) -> Format:
    """The format, or an ExportError naming what is wrong with the request."""
    if kind not in KINDS:
        raise ExportError(f"unknown export kind {kind!r} (one of {', '.join(KINDS)})", "kind")
    spec = KINDS[kind]
    if format_name not in spec.formats:
        raise ExportError(f"{kind} export only as {', '.join(spec.formats)}", "format")
    for option in sorted(given):
        # An option the kind ignores would be a filter the user believes was applied.
        if option not in spec.options or format_name not in FORMAT_OPTIONS.get(option, (format_name,)):
            raise ExportError(f"does not apply to a {kind} {format_name} export", option)
    return spec.formats[format_name]


def build_export(kind: str, format_name: str, options: ExportOptions, user: Any = None) -> Export:
    given = {
        name
        for name in ExportOptions.__dataclass_fields__
        if name != "unredacted" and getattr(options, name) not in (None, False)
    }
    chosen = check_request(kind, format_name, given)
    rows = chosen.layout(KINDS[kind].rows(options), options)
    export = Export(
        kind=kind,
        format=format_name,
        shape=DIRECTORY if chosen.encoding in ("hf", "taskdir", "harbor") else FILE,
        total=rows.total,
        unit=rows.unit,
        noun=rows.noun,
        filename=f"{kind}-{format_name}{EXTENSIONS[chosen.encoding]}",
        content_type=CONTENT_TYPES[chosen.encoding],
        redacted=not options.unredacted,
        refused=rows.refused,
    )
    clean = redacted_rows(rows.rows, rows.where, export.redacted, export.tally)
    if chosen.encoding == "jsonl" and chosen.layout is _same and rows.lines is not None:
        export.pieces = redacted_lines(rows.lines, rows.where, export.redacted, export.tally)
    elif chosen.encoding == "jsonl":
        export.pieces = fmt.jsonl(marked(clean, export.redacted, chosen.unredacted_mark))
    elif chosen.encoding in ("taskdir", "harbor"):
        export.files = _task_files(clean, export, harbor_files if chosen.encoding == "harbor" else taskdir_files)
    else:
        assert chosen.schema is not None and chosen.columns is not None
        schema = chosen.schema(options).with_metadata({"crucible.redacted": json.dumps(export.redacted)})
        if chosen.encoding == "parquet":
            export.pieces = fmt.parquet(clean, schema, chosen.columns, chosen.group_rows())
        else:
            export.files = fmt.hf_files(clean, schema, chosen.columns)
    if export.pieces is not None:
        export.pieces = _audited(export.pieces, export, user)
    else:
        assert export.files is not None
        export.files = _audited(export.files, export, user)
    return export


def _task_files(
    records: Iterator[dict[str, Any]], export: Export, files: Callable[[Task], Iterable[FilePiece]]
) -> Iterator[FilePiece]:
    """Each task's directory, its text files passed through redaction as the records are."""
    if not export.redacted:
        yield "EXPORT.json", json.dumps({UNREDACTED_MARK: True}).encode(), 0o644
    for record in records:
        task = Task.objects.get(pk=record["pk"])
        try:
            for name, content, mode in files(task):
                yield name, redact_file(name, content, export.redacted, export.tally), mode
        except TaskExportError as exc:
            raise ExportError(str(exc)) from None


def _audited(pieces: Iterator[Any], export: Export, user: Any) -> Iterator[Any]:
    """The export's one audit event, written when the stream ends: the count is known only then."""
    complete = False
    try:
        yield from pieces
        complete = True
    finally:
        audit(
            user,
            AuditAction.EXPORT,
            export.kind,
            format=export.format,
            redacted=export.redacted,
            count=export.tally.count,
            findings=export.tally.findings,
            rules=export.tally.rules(),
            complete=complete,
            refused=dict(export.refused),
        )
        if export.tally.by_rule:
            # What was redacted, where and by which rule, as for an import (core.audit).
            record_redactions(user, export.kind, export.tally.by_rule, export_format=export.format)
