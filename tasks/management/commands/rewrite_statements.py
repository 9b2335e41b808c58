from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from tqdm import tqdm

from tasks.builders.rewrite import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, ChatClient, RewriteError, check_server
from tasks.models import Task
from tasks.rewrites import RewriteConflict, rewrite_statement, skip_reason


def allowed_server(url: str) -> str:
    """An argparse type: a server the operator does not list is refused before anything is built."""
    try:
        check_server(url)
    except RewriteError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return url


def add_rewrite_arguments(parser: CommandParser) -> None:
    """The builders' option: rewrite each built task's statement before it is validated."""
    parser.add_argument(
        "--rewrite-with",
        metavar="URL",
        type=allowed_server,
        default=None,  # argparse runs `type` on a string default: "" would be refused at every build
        help="rewrite the built statements with the model behind this OpenAI-compatible server",
    )
    parser.add_argument("--rewrite-model", metavar="MODEL", default="", help="the model to ask (with --rewrite-with)")


def rewrite_built(options: dict[str, Any], task_ids: list[str], out: OutputWrapper, err: Any) -> None:
    """The builders' one call: rewrite what was built when asked to. A server failure is reported, not
    raised, so the build report is still stored and the tasks keep their composed statements."""
    if not options["rewrite_with"]:
        return
    if not options["rewrite_model"]:
        out.write("statements not rewritten: --rewrite-with needs --rewrite-model")
        return
    tasks = list(Task.objects.filter(task_id__in=task_ids).order_by("task_id"))
    try:
        client = ChatClient(options["rewrite_with"], options["rewrite_model"])
    except RewriteError as exc:
        out.write(f"statements not rewritten: {exc}")
        return
    try:
        counts, stopped = rewrite_tasks(
            tasks, client, names=set(), redo=False, quiet=options["verbosity"] == 0, err=err
        )
    finally:
        client.close()
    out.write(summary(counts, stopped))


def rewrite_tasks(
    tasks: list[Task],
    client: ChatClient,
    *,
    names: set[str],
    redo: bool,
    quiet: bool,
    err: Any,
    dry_run: bool = False,
    shown: OutputWrapper | None = None,
) -> tuple[Counter[str], str]:
    """Counts by outcome (and refusal reason), and why the run stopped early ("" if it did not).

    The first server error stops the run: a server that is down or refuses the model fails every
    task the same way. Running again resumes, since rewritten tasks are skipped.
    """
    counts: Counter[str] = Counter()
    for task in tqdm(tasks, desc="rewriting", unit="task", disable=quiet, file=err):
        why = skip_reason(task, client, named=task.task_id in names, redo=redo)
        if why:
            counts[f"skipped: {why}"] += 1
            continue
        try:
            outcome = rewrite_statement(task, client, dry_run=dry_run)
        except RewriteConflict as exc:
            counts[f"skipped: {exc}"] += 1
            continue
        except RewriteError as exc:
            return counts, f"{task.task_id}: {exc}"
        counts[outcome.status] += 1
        if outcome.reason:
            counts[f"refused: {outcome.reason.split(':')[0]}"] += 1
        if shown is not None and outcome.generation is not None:
            verdict = outcome.status + (f" ({outcome.reason})" if outcome.reason else "")
            shown.write(f"--- {task.task_id}: {verdict}\n{outcome.generation['generated']}")
    return counts, ""


def summary(counts: Counter[str], stopped: str) -> str:
    line = f"statements: {counts['accepted']} accepted, {counts['refused']} refused"
    details = [f"{n} {key}" for key, n in sorted(counts.items()) if key not in ("accepted", "refused")]
    if details:
        line += " (" + "; ".join(details) + ")"
    return line + (f"; stopped at {stopped}" if stopped else "")


class Command(BaseCommand):
    help = (
        "Rewrite a suite's problem statements as issues a user would write, with a model behind an "
        "OpenAI-compatible server. The original and the prompt are kept in the task's metadata; an answer "
        "that leaks the patch or scores lower than the original is refused with its reason."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--server", required=True, type=allowed_server, help="base URL, e.g. http://127.0.0.1:8000")
        parser.add_argument("--model", required=True, help="the model name the server expects")
        parser.add_argument("--tasks", nargs="+", default=[], help="only these task ids (handwritten ones too)")
        parser.add_argument("--dry-run", action="store_true", help="show the verdicts and answers; write nothing")
        parser.add_argument("--redo", action="store_true", help="ask again for tasks this model already rewrote")
        parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
        parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 16 <= options["max_tokens"] <= 4096:
            raise CommandError("--max-tokens must be between 16 and 4096")
        tasks = Task.objects.filter(suite__name=options["suite"]).order_by("task_id")
        if options["tasks"]:
            tasks = tasks.filter(task_id__in=options["tasks"])
        chosen = list(tasks)
        missing = sorted(set(options["tasks"]) - {t.task_id for t in chosen})
        if missing:
            raise CommandError(f"suite {options['suite']!r} has no task(s) {', '.join(missing)}")
        if not chosen:
            raise CommandError(f"suite {options['suite']!r} has no tasks")
        try:
            client = ChatClient(
                options["server"],
                options["model"],
                max_tokens=options["max_tokens"],
                temperature=options["temperature"],
                timeout=options["timeout"],
            )
        except RewriteError as exc:
            raise CommandError(str(exc)) from None
        try:
            counts, stopped = rewrite_tasks(
                chosen,
                client,
                names=set(options["tasks"]),
                redo=options["redo"],
                quiet=options["verbosity"] == 0,
                err=self.stderr._out,
                dry_run=options["dry_run"],
                shown=self.stdout if options["dry_run"] else None,
            )
        finally:
            client.close()
        self.stdout.write(summary(counts, stopped) + (" (dry run: nothing written)" if options["dry_run"] else ""))
        if counts["accepted"] and not options["dry_run"]:
            # A new statement is a new version: what validation said was about the old one.
            self.stdout.write(f"validate them again: python manage.py validate_tasks --suite {options['suite']}")
        if stopped and not sum(counts[k] for k in ("accepted", "refused")):
            raise CommandError(f"no statement rewritten: {stopped}")
