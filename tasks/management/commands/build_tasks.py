from __future__ import annotations

import json
import logging
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from tasks.builders import error_log, git_history, lang_history
from tasks.builders.common import BuildError, git, repo_name
from tasks.builders.environment import parse_variables
from tasks.builders.report import BuildReport
from tasks.gate import MIN_PASS_SHARE, GateReport, run_gate
from tasks.lang_tests import PYTHON
from tasks.management.commands._building import (
    add_common_arguments,
    attach_environments,
    built_before,
    check_test_command,
    environment_options,
    finish_build,
    import_as_built,
    keep_if_readable,
    store_report,
    validation_options,
)
from tasks.management.commands.rewrite_statements import add_rewrite_arguments
from tasks.services import DEFAULT_SUITE, TaskImportResult, import_task_dirs
from tasks.taskdir import TaskDirError

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Build tasks from a repository's git history (--from-git, newest commits first) or from an error "
        "log (--from-log). A candidate that cannot be a task is skipped with its reason in the suite's "
        "build report; it never stops the build."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--from-git", type=Path, metavar="REPO")
        source.add_argument("--from-log", type=Path, metavar="LOG")
        parser.add_argument("--repo", type=Path, help="the repository the log came from (with --from-log)")
        parser.add_argument("--test", action="append", default=[], help="failing test node id (with --from-log)")
        parser.add_argument("--patch", type=Path, help="expected patch (with --from-log, optional)")
        parser.add_argument("--max", type=int, default=50, help="look at this many candidate commits (--from-git)")
        parser.add_argument("--max-files", type=int, default=10)
        parser.add_argument("--max-lines", type=int, default=400)
        parser.add_argument("--since", default="", help="only commits after this date (git log --since)")
        parser.add_argument("--until", default="", help="only commits before this date (git log --until)")
        parser.add_argument("--rev-range", default="", help="only commits in this range, e.g. v0.4.0..v0.5.0")
        parser.add_argument("--paths", nargs="+", default=[], help="only commits touching these paths")
        parser.add_argument("--oldest-first", action="store_true", help="take the oldest candidates, not the newest")
        parser.add_argument("--issues", type=Path, help="JSON map of issue number -> {title, body}")
        parser.add_argument("--license", default="", help="SPDX licence of the repository, if known")
        parser.add_argument(
            "--skip-gate",
            action="store_true",
            help="build tasks even when the repository's suite fails at its newest commit (tasks.gate)",
        )
        parser.add_argument(
            "--min-gate-pass",
            type=float,
            default=MIN_PASS_SHARE,
            help=f"the share of tests that must pass at the newest commit (default {MIN_PASS_SHARE})",
        )
        add_common_arguments(parser)
        add_rewrite_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        quiet = options["verbosity"] == 0
        if options["max"] < 1:
            raise CommandError("--max must be at least 1")
        if not 0 <= options["min_gate_pass"] <= 1:
            raise CommandError("--min-gate-pass must be between 0 and 1")
        check_test_command(options["test_command"])
        validation = validation_options(options)
        with tempfile.TemporaryDirectory(prefix="crucible-build-") as tmp:
            out = Path(tmp)
            result = TaskImportResult(options["suite"] or DEFAULT_SUITE)
            try:
                if options["from_git"]:
                    # Each task is imported as soon as it is built: a build stopped half-way resumes.
                    report = self._from_git(options, out, quiet, result)
                else:
                    report = self._from_log(options, out)
                    attach_environments(out, options, report, quiet, self.stderr._out)
                    result = import_task_dirs(out, options["suite"], options["split"])
                if not report.built:
                    raise BuildError(f"no candidate became a task: {report.to_json()['skipped_by_reason']}")
            except (BuildError, TaskDirError, OSError, json.JSONDecodeError) as exc:
                raise CommandError(str(exc)) from None
        finish_build(self, report, result, options, validation)

    def _from_git(self, options: dict[str, Any], out: Path, quiet: bool, result: TaskImportResult) -> BuildReport:
        repo: Path = options["from_git"]
        issues = json.loads(options["issues"].read_text()) if options["issues"] else {}
        selection = git_history.Selection(
            options["since"], options["until"], options["rev_range"], tuple(options["paths"]), options["oldest_first"]
        )
        found = git_history.candidates(repo, selection)[: options["max"]]
        if not found:
            raise BuildError(f"{repo}: no commit changes both code and tests")
        name = repo_name(repo, options["repo_name"])
        report = BuildReport(
            "git_history",
            name,
            {k: options[k] for k in ("max", "max_files", "max_lines", "since", "until", "rev_range", "paths")}
            | {"oldest_first": options["oldest_first"], "test_command": options["test_command"]}
            | environment_options(options),
            candidates=len(found),
        )
        self._gate(repo, name, options, report)
        # A re-run (after an interruption, or with a larger --max) builds only what the suite lacks.
        before = built_before(options["suite"], options)
        for candidate in tqdm(found, desc="building", unit="candidate", disable=quiet, file=self.stderr._out):
            task_id = git_history.task_id_for(name, candidate)
            if before.get(task_id) == candidate.parent:
                report.resumed(task_id)
                continue
            self._build_one(repo, candidate, out, issues, name, options, report, result)
        return report

    def _gate(self, repo: Path, name: str, options: dict[str, Any], report: BuildReport) -> None:
        """The repository's suite at its newest commit, once: a failure stops the build with one diagnosis."""
        if options["skip_gate"]:
            skipped = GateReport(True, "HEAD", skipped=True)
            report.gate = skipped.to_json()
            self.stderr.write(skipped.text())
            return
        self.stderr.write("repository gate: running the suite once at the newest commit...")
        language = lang_history.repo_language(repo)
        if language != PYTHON:
            gate = lang_history.run_lang_gate(
                repo, language, settings.CRUCIBLE_SANDBOX_BACKEND, options["min_gate_pass"]
            )
        else:
            gate = run_gate(
                repo,
                git(repo, "rev-parse", "HEAD").decode().strip(),
                backend=settings.CRUCIBLE_SANDBOX_BACKEND,
                test_command=options["test_command"],
                pytest=options["pytest"],
                variables=parse_variables(options["test_env"]),
                use_environment=options["env"] != "none",
                repo_name=name,
                min_pass_share=options["min_gate_pass"],
            )
        report.gate = gate.to_json()
        self.stderr.write(gate.text())
        if not gate.passed:
            store_report(options["suite"], options["split"], report)
            raise BuildError(f"{name}: the repository gate failed; no task was built\n{gate.text()}")

    def _build_one(
        self,
        repo: Path,
        candidate: git_history.Candidate,
        out: Path,
        issues: dict[str, Any],
        name: str,
        options: dict[str, Any],
        report: BuildReport,
        result: TaskImportResult,
    ) -> None:
        """One candidate, judged alone: whatever goes wrong with it is its line in the report."""
        commit, subject = candidate.commit, candidate.subject
        try:
            skip = git_history.judge(repo, candidate, options["max_files"], options["max_lines"])
            if skip is not None:
                report.skip(commit, subject, *skip)
                return
            task_dir = git_history.build_task(
                repo, candidate, out, issues, name, options["license"], options["test_command"]
            )
        except (BuildError, OSError, subprocess.SubprocessError, UnicodeError) as exc:
            logger.info("build_tasks: %s skipped: %s", commit[:10], exc)
            reason = next((r for r in git_history.SkipReason if str(r) in str(exc)), git_history.SkipReason.BUILD_ERROR)
            report.skip(commit, subject, reason, str(exc))
            return
        if keep_if_readable(task_dir, report, commit, subject, options["suite"]):
            import_as_built(task_dir, options, report, result, commit)

    def _from_log(self, options: dict[str, Any], out: Path) -> BuildReport:
        if options["repo"] is None or not options["repo"].is_dir():
            raise BuildError("--from-log needs --repo DIR, the repository the log came from")
        patch = options["patch"].read_text() if options["patch"] else ""
        name = repo_name(options["repo"], options["repo_name"])
        task = error_log.build_task(
            options["repo"],
            options["from_log"].read_text(errors="replace"),
            out,
            options["test"] or None,
            patch,
            repo_name=name,
            test_command=options["test_command"],
        )
        report = BuildReport("error_log", name, candidates=1)
        report.built.append(task.name)
        return report
