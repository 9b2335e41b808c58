from __future__ import annotations

from collections import Counter

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, guess_lexer_for_filename
from pygments.util import ClassNotFound

from core.permissions import role_required
from core.roles import RESEARCHER
from tasks.environments import environments_of
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.queries import file_tree, suites_with_counts
from tasks.registry import load_suite_columns
from tasks.services import start_validation_run
from tasks.storage import TreeError, read_tree_file
from tasks.taskdir import TaskDirError

MAX_FILE_VIEW = 512 * 1024


@role_required()
def suite_list(request: HttpRequest) -> HttpResponse:
    return render(request, "tasks/suite_list.html", {"suites": suites_with_counts()})


@role_required()
def suite_detail(request: HttpRequest, suite: str) -> HttpResponse:
    suite_obj = get_object_or_404(TaskSuite, name=suite)
    return render(request, "tasks/suite_detail.html", _suite_context(suite_obj))


def _suite_context(suite: TaskSuite) -> dict[str, object]:
    tasks = list(suite.tasks.order_by("task_id"))
    columns = load_suite_columns(tasks)
    rows = [(task, [(loaded.column, loaded.values.get(task.pk)) for loaded in columns]) for task in tasks]
    statuses = Counter(task.validation_status for task in tasks)
    return {
        "suite": suite,
        "rows": rows,
        "columns": columns,
        "statuses": sorted(statuses.items()),
        "last_run": suite.validation_runs.first(),
        "environments": environments_of(tasks),
    }


@role_required()
def task_detail(request: HttpRequest, suite: str, task_id: str) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("suite"), suite__name=suite, task_id=task_id)
    recent = task.trajectories.order_by("-created_at", "-id")[:20]
    return render(
        request,
        "tasks/task_detail.html",
        {
            "task": task,
            "tree": file_tree(task.snapshot_files),
            "tests_tree": file_tree(task.tests_files),
            "trajectories": recent,
            # The suite page's extra columns (the reward gap) for this one task too.
            "columns": [(loaded.column, loaded.values.get(task.pk)) for loaded in load_suite_columns([task])],
        },
    )


@role_required()
def task_file(request: HttpRequest, suite: str, task_id: str, file_path: str) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("suite"), suite__name=suite, task_id=task_id)
    known = {str(entry[0]) for entry in task.snapshot_files}
    if file_path not in known:
        raise Http404("No such file in the snapshot.")
    try:
        data = read_tree_file(task.snapshot_hash, file_path, MAX_FILE_VIEW + 1)
    except TreeError:
        raise Http404("The snapshot is missing from the store.") from None
    truncated = len(data) > MAX_FILE_VIEW
    text = data[:MAX_FILE_VIEW].decode("utf-8", "replace")
    try:
        lexer = guess_lexer_for_filename(file_path, text)
    except ClassNotFound:
        lexer = TextLexer()
    # Pygments escapes the source; its output is the only HTML on this page not
    # produced by the template engine.
    code = highlight(text, lexer, HtmlFormatter(linenos="table", cssclass="code"))
    return render(
        request,
        "tasks/task_file.html",
        {"task": task, "path": file_path, "code": code, "truncated": truncated},
    )


@require_POST
@role_required(RESEARCHER)
def validate_suite(request: HttpRequest, suite: str) -> HttpResponse:
    suite_obj = get_object_or_404(TaskSuite, name=suite)
    try:
        runs = int(request.POST.get("runs", "5"))
        run = start_validation_run(suite_obj, runs, request.user)
    except (ValueError, TaskDirError):
        return render(
            request,
            "tasks/suite_detail.html",
            _suite_context(suite_obj) | {"form_error": "Runs must be a whole number from 1 to 20."},
            status=400,
        )
    return redirect("tasks:validation-run", suite=suite_obj.name, run_id=run.pk)


@role_required()
def validation_run(request: HttpRequest, suite: str, run_id: int) -> HttpResponse:
    run = get_object_or_404(ValidationRun.objects.select_related("suite"), pk=run_id, suite__name=suite)
    tasks = list(run.suite.tasks.order_by("task_id").values_list("task_id", flat=True))
    rows = [(task_id, run.results.get(task_id, "pending")) for task_id in tasks]
    return render(request, "tasks/validation_run.html", {"run": run, "rows": rows})
