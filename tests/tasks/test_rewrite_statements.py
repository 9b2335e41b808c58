"""Statements rewritten by a model behind an OpenAI-compatible server: the bundled model for real,
a hostile fake server for every way an answer can be refused, and the task page that shows both."""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper

from core.models import AuditEvent
from patches import parse
from tasks.builders import statements
from tasks.builders.rewrite import MAX_ANSWER_CHARS, MAX_RESPONSE_BYTES, build_prompt, clean_answer
from tasks.management.commands.rewrite_statements import rewrite_built
from tasks.models import Task
from tasks.rewrites import GENERATION_KEY, rewrite_context
from tasks.services import import_task_dirs
from tasks.taskdir import task_version
from tests.conftest import DEMO, client_for
from trajectories.model_server import ModelServer

pytestmark = pytest.mark.django_db

SUITE = "rewrites"
TEST_DIFF = """\
--- a/tests/test_parse_config.py
+++ b/tests/test_parse_config.py
@@ -26,0 +27,3 @@
+def test_empty_input():
+    assert parse_config("") == {}
+
"""
# An issue a person could have written: long enough, names the behaviour, no patch line, no test name.
GOOD_ISSUE = (
    "# parse_config crashes when the config file is empty\n\n"
    "Our deploy script reads an optional local.cfg and passes its text to `parse_config`. When the "
    "file exists but is empty, for example right after it was created with touch, the script dies with "
    "an IndexError instead of treating the file as having no settings at all.\n\n"
    '    >>> parse_config("")\n    Traceback (most recent call last):\n      File "<stdin>", line 1, in <module>\n'
    "    IndexError: list index out of range\n\n"
    'Expected: `parse_config("")` should return an empty dict, just like a file that holds only comments.\n'
)


def patch_lines(patch: str) -> list[str]:
    files = parse(patch, recount=True)
    return [x.strip() for p in files for _, x in (*p.added_lines(), *p.removed_lines()) if len(x.strip()) >= 20]


def composed_task(tmp_path: Path, demo_id: str) -> Path:
    """A demo task as a builder would make it: not handwritten, its statement composed from a commit."""
    dest = tmp_path / demo_id
    shutil.copytree(DEMO / "tasks" / demo_id, dest)
    meta = json.loads((dest / "metadata.json").read_text())
    meta["source"] = "git_history"
    (dest / "metadata.json").write_text(json.dumps(meta))
    patch = (dest / "expected_patch").read_text()
    body = "When the file exists but is empty the whole script dies."
    subject = (dest / "task.md").read_text().splitlines()[0].lstrip("# ") + " (fixes #12)"
    (dest / "task.md").write_text(statements.compose(subject, body, TEST_DIFF if demo_id == "task_0001" else "", patch))
    return dest


@pytest.fixture
def task(tmp_path: Path) -> Task:
    import_task_dirs(composed_task(tmp_path, "task_0001"), SUITE)
    return Task.objects.get(task_id="task_0001")


class FakeModelServer:
    """A chat-completions endpoint on loopback that answers whatever the test sets."""

    def __init__(self) -> None:
        self.answer = ""
        self.finish = "stop"
        self.raw: bytes | None = None
        self.prompts: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.prompts.append(body["messages"][0]["content"])
                data = (
                    fake.raw
                    or json.dumps(
                        {
                            "choices": [
                                {"message": {"role": "assistant", "content": fake.answer}, "finish_reason": fake.finish}
                            ]
                        }
                    ).encode()
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer()
    yield server
    server.close()


def rewrite(server_url: str, *extra: str, model: str = "fake-model") -> str:
    out = StringIO()
    call_command(
        "rewrite_statements",
        "--suite",
        SUITE,
        "--server",
        server_url,
        "--model",
        model,
        *extra,
        stdout=out,
        verbosity=0,
    )
    return out.getvalue()


def test_an_accepted_rewrite_replaces_the_statement_keeps_the_original_and_makes_a_new_version(
    task: Task, fake_server: FakeModelServer
) -> None:
    Task.objects.filter(pk=task.pk).update(validation_status="valid", validation_report={"checks": []})
    composed, version = task.statement, task.version
    fake_server.answer = "Sure! Here is the issue:\n```markdown\n" + GOOD_ISSUE + "```\n<|im_end|>"
    assert "1 accepted, 0 refused" in rewrite(fake_server.url)
    task.refresh_from_db()
    generation = task.metadata[GENERATION_KEY]
    assert generation["accepted"] and generation["reason"] == ""
    assert task.statement == generation["generated"] == GOOD_ISSUE  # fences, preamble and chat token gone
    assert generation["original"] == composed and generation["model"] == "fake-model"
    assert generation["server"] == fake_server.url + "/v1" and generation["generated_at"].endswith("+00:00")
    assert generation["quality"]["generated"] >= generation["quality"]["original"]
    # The prompt is kept as sent; it holds the statement and what the tests assert, never the patch.
    assert generation["prompt"] == fake_server.prompts[-1]
    assert 'parse_config("") == {}' in generation["prompt"] and "Problem statement" in generation["prompt"]
    assert not [line for line in patch_lines(task.expected_patch) if line in generation["prompt"]]
    assert "diff --git" not in generation["prompt"]
    # An edited statement is new content: a new version by the one rule, and validation to be redone.
    assert task.version != version
    assert task.version == task_version(
        task.statement, task.metadata, task.expected_patch, task.snapshot_hash, task.tests_hash
    )
    assert task.validation_status == "unvalidated" and task.validation_report == {}
    event = AuditEvent.objects.get(action="generate", target_id=str(task.pk), detail__what="statement")
    assert event.detail["accepted"] is True and event.detail["version"] == task.version
    # Running again resumes: this model already rewrote it. --redo asks again, from the composed original.
    assert "already rewritten by this model" in rewrite(fake_server.url)
    fake_server.answer = GOOD_ISSUE + "\nThe script should not crash on an empty file.\n"
    rewrite(fake_server.url, "--redo")
    task.refresh_from_db()
    assert task.metadata[GENERATION_KEY]["original"] == composed
    assert composed.strip() in fake_server.prompts[-1] and GOOD_ISSUE.strip() not in fake_server.prompts[-1]


HUGE_BODY = b"{" + b" " * (MAX_RESPONSE_BYTES + 10) + b"}"


@pytest.mark.parametrize(
    ("answer", "raw", "reason"),  # the reply's text, or its raw body; the reason it must be refused for
    [
        pytest.param(
            GOOD_ISSUE + '\nThe fix is:\n\n    if lines and lines[0].startswith("\\ufeff"):\n',
            None,
            "line(s) of the expected patch",
            id="added-line",
        ),
        pytest.param(
            GOOD_ISSUE + '\nIt fails at `if lines[0].startswith("\\ufeff"):` today.\n',
            None,
            "line(s) of the expected patch",
            id="removed-line",
        ),
        pytest.param(
            GOOD_ISSUE + '\nWrite  `if lines and\n  lines[0].startswith("\\ufeff"):`\n',
            None,
            "line(s) of the expected patch",
            id="added-line-respaced",
        ),
        pytest.param(GOOD_ISSUE + "x" * MAX_ANSWER_CHARS, None, "characters long", id="huge-answer"),
        pytest.param("", HUGE_BODY, "larger than", id="huge-reply"),
        pytest.param(GOOD_ISSUE + "<script>alert(document.cookie)</script>\n", None, "HTML markup", id="script"),
        pytest.param(GOOD_ISSUE + '<img src=x onerror="alert(1)">\n', None, "HTML markup", id="markup"),
        pytest.param("```\n<|im_end|>\n```", None, "empty once markup is stripped", id="only-fences"),
        pytest.param(GOOD_ISSUE + "Reported upstream (fixes ).\n", None, "empty reference shell", id="empty-shell"),
        pytest.param(GOOD_ISSUE + "See gh-4411 for details.\n", None, "issue or pull request", id="reference"),
        pytest.param(GOOD_ISSUE + "test_empty_input fails.\n", None, "hidden test", id="hidden-test-name"),
        pytest.param(
            GOOD_ISSUE + "Look at configkit/loader.py.\n", None, "files the snapshot lacks", id="made-up-file"
        ),
        pytest.param("It crashes.", None, "lower than the composed statement", id="worse"),
        pytest.param(GOOD_ISSUE + "\nProblem statement:\n\n# parse_config\n", None, "repeats the prompt", id="echo"),
        pytest.param(GOOD_ISSUE + "It still dies on an empty file.\n" * 2, None, "repeats itself", id="loop"),
        pytest.param(GOOD_ISSUE, None, "cut off at the 400-token limit", id="cut"),
    ],
)
def test_a_hostile_answer_is_refused_with_its_reason_and_the_statement_stays(
    task: Task, fake_server: FakeModelServer, answer: str, raw: bytes | None, reason: str
) -> None:
    composed, version, status = task.statement, task.version, task.validation_status
    fake_server.answer, fake_server.raw = answer, raw
    fake_server.finish = "length" if "cut off" in reason else "stop"
    try:
        assert "0 accepted, 1 refused" in rewrite(fake_server.url)
    finally:
        fake_server.raw, fake_server.finish = None, "stop"
    task.refresh_from_db()
    generation = task.metadata[GENERATION_KEY]
    assert task.statement == composed and not generation["accepted"]
    assert reason in generation["reason"], generation["reason"]
    assert generation["original"] == composed and generation["prompt"]
    # A refusal is a note beside the task: nothing an agent sees changed, so version and validation stay.
    assert task.version == version and task.validation_status == status
    for line in patch_lines(task.expected_patch):
        assert line not in generation["generated"] and line not in generation["reason"]
    if reason in ("characters long", "larger than", "HTML markup"):
        assert generation["generated"] == ""  # an answer refused unread or as markup is not kept


def test_code_fences_go_and_a_code_block_stays_a_block() -> None:
    wrapped = "Here is the issue:\n```markdown\n# Title\n\nIt breaks:\n```python\n>>> f()\n```\nThe end.\n```"
    assert clean_answer(wrapped) == "# Title\n\nIt breaks:\n\n    >>> f()\n\nThe end.\n"
    assert clean_answer("It breaks:\n```python\n>>> f()\n") == "It breaks:\n\n    >>> f()\n"  # never closed


def test_a_dry_run_shows_the_verdict_and_writes_nothing(task: Task, fake_server: FakeModelServer) -> None:
    fake_server.answer = GOOD_ISSUE
    out = rewrite(fake_server.url, "--dry-run")
    assert "--- task_0001: accepted" in out and "parse_config crashes when" in out and "nothing written" in out
    task.refresh_from_db()
    assert GENERATION_KEY not in task.metadata and task.statement != GOOD_ISSUE


def test_a_handwritten_statement_is_rewritten_only_when_named(tmp_path: Path, fake_server: FakeModelServer) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0002", SUITE)
    fake_server.answer = GOOD_ISSUE
    assert "1 skipped: handwritten" in rewrite(fake_server.url)
    assert GENERATION_KEY not in Task.objects.get(task_id="task_0002").metadata
    rewrite(fake_server.url, "--tasks", "task_0002")
    assert GENERATION_KEY in Task.objects.get(task_id="task_0002").metadata


@pytest.mark.parametrize(
    "url",
    ["http://models.example.com:8000", "http://127.0.0.1:8000@models.example.com/", "file:///etc/passwd"],
)
def test_a_server_the_operator_does_not_list_is_refused_before_anything_runs(
    task: Task, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRUCIBLE_MODEL_SERVERS", raising=False)
    with pytest.raises(CommandError, match="not allowed|credentials|not an http"):
        rewrite(url)
    # The builders' option is checked as it is parsed: a refused server costs no build.
    with pytest.raises(CommandError, match="--rewrite-with"):
        call_command("build_tasks", "--from-git", "/nonexistent", "--rewrite-with", url, verbosity=0)
    task.refresh_from_db()
    assert GENERATION_KEY not in task.metadata


def test_loopback_is_refused_once_the_operator_lists_only_a_remote_server(
    task: Task, fake_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_MODEL_SERVERS", "https://models.example.com")
    with pytest.raises(CommandError, match="not allowed"):
        rewrite(fake_server.url)


def test_build_tasks_rewrites_what_it_built_and_a_dead_server_never_fails_a_build(
    tmp_path: Path, fake_server: FakeModelServer
) -> None:
    demo = DEMO / "tasks" / "task_0001"
    repo = tmp_path / "configkit"
    shutil.copytree(demo / "repo_snapshot", repo)
    shutil.copy(demo / "tests" / "test_parse_config.py", repo / "tests" / "test_parse_config.py")
    log = tmp_path / "ci.log"
    log.write_text(
        "FAILED tests/test_parse_config.py::test_empty_input - IndexError: list index out of range\n"
        "1 failed, 5 passed in 0.05s\n"
    )
    fake_server.answer = GOOD_ISSUE
    out = StringIO()
    call_command(
        "build_tasks",
        *("--from-log", str(log), "--repo", str(repo), "--patch", str(demo / "expected_patch"), "--suite", "logs"),
        *("--rewrite-with", fake_server.url, "--rewrite-model", "fake-model"),
        stdout=out,
        verbosity=0,
    )
    assert "statements: 1 accepted, 0 refused" in out.getvalue()
    task = Task.objects.get(suite__name="logs")
    assert task.source == "error_log" and task.statement == GOOD_ISSUE
    assert task.metadata[GENERATION_KEY]["original"] != GOOD_ISSUE
    # A server that is gone is a line in the output: the build report is still stored.
    dead = {"rewrite_with": "http://127.0.0.1:9", "rewrite_model": "fake-model", "verbosity": 0}
    rewrite_built(dead, [task.task_id], OutputWrapper(out), StringIO())
    assert f"stopped at {task.task_id}: cannot reach model server" in out.getvalue()
    rewrite_built({**dead, "rewrite_model": ""}, [task.task_id], OutputWrapper(out), StringIO())
    assert "--rewrite-with needs --rewrite-model" in out.getvalue()


def test_the_task_page_marks_a_generated_statement_and_shows_its_prompt_as_text(task: Task, researcher: User) -> None:
    hostile = '<script>alert("prompt")</script>'
    metadata = {
        **task.metadata,
        GENERATION_KEY: {
            "model": '<img src=x onerror="alert(1)">',
            "server": "http://127.0.0.1:8000/v1",
            "prompt": f"Rewrite this {hostile}",
            "original": f"composed {hostile}",
            "generated": f"# generated\n\n{hostile}",
            "generated_at": "2025-01-01T00:00:00+00:00",
            "accepted": True,
            "reason": "",
            "quality": {"original": 0.5, "generated": 0.9},
            "params": {},
        },
    }
    Task.objects.filter(pk=task.pk).update(metadata=metadata, statement=metadata[GENERATION_KEY]["generated"])
    page = client_for(researcher).get(f"/tasks/{SUITE}/{task.task_id}/").content.decode()
    assert "Statement generated by" in page and "The prompt" in page
    assert "Rewrite this &lt;script&gt;alert(&quot;prompt&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<script>alert" not in page and "<img src=x" not in page
    # A refused rewrite is shown as refused, with its reason, and the answer as text.
    metadata[GENERATION_KEY] |= {"accepted": False, "reason": f"the answer holds HTML markup: {hostile}"}
    Task.objects.filter(pk=task.pk).update(metadata=metadata)
    page = client_for(researcher).get(f"/tasks/{SUITE}/{task.task_id}/").content.decode()
    assert "was refused: the answer holds HTML markup: &lt;script&gt;" in page
    assert "<script>alert" not in page


# --- the bundled model behind `transformers serve` ----------------------------------------------

MAX_TOKENS = 100  # a few seconds a task on a CI core; enough for a short issue


def test_the_bundled_model_rewrites_two_statements_each_judged_and_recorded(
    tmp_path: Path, model_server: ModelServer
) -> None:
    for demo_id in ("task_0001", "task_0002"):
        import_task_dirs(composed_task(tmp_path, demo_id), SUITE)
    before = {t.task_id: t.statement for t in Task.objects.filter(suite__name=SUITE)}
    versions = {t.task_id: t.version for t in Task.objects.filter(suite__name=SUITE)}
    out = rewrite(model_server.base_url, "--max-tokens", str(MAX_TOKENS), model=model_server.model)
    assert re.search(r"statements: (\d) accepted, (\d) refused", out), out
    for task in Task.objects.filter(suite__name=SUITE):
        generation = task.metadata[GENERATION_KEY]
        assert generation["model"] == model_server.model and generation["original"] == before[task.task_id]
        assert generation["params"]["max_tokens"] == MAX_TOKENS
        assert generation["prompt"] == build_prompt(rewrite_context(task))
        assert not [line for line in patch_lines(task.expected_patch) if line in generation["prompt"]]
        if generation["accepted"]:
            assert task.statement == generation["generated"] and task.statement.strip()
            assert generation["quality"]["generated"] >= generation["quality"]["original"]
        else:
            assert task.statement == before[task.task_id] and generation["reason"]
        if generation["accepted"]:
            assert task.version == task_version(
                task.statement, task.metadata, task.expected_patch, task.snapshot_hash, task.tests_hash
            )
        else:
            assert task.version == versions[task.task_id]
        for line in patch_lines(task.expected_patch):
            assert line not in task.statement
