"""One try need not cost a suite: launch on one task or a selection, and the launch form checks
the model (directory or server) before anything is queued."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutError, RolloutSettings

pytestmark = pytest.mark.django_db
SMALL = ("task_0001", "task_0008", "task_0013")


@pytest.fixture
def small(db: None) -> TaskSuite:
    for task_id in SMALL:
        import_task_dirs(DEMO / "tasks" / task_id, "small")
    return TaskSuite.objects.get(name="small")


def launch(user: User, **fields: str) -> tuple[int, str]:
    data = {"suite": "small", "policy": "scripted", "samples": "2", "temperature": "0.8", "max_steps": "10"}
    data |= {"sandbox": "bwrap", **fields}
    response = client_for(user).post("/batches/", data)
    return response.status_code, response.content.decode()


def test_start_batch_takes_a_selection_of_tasks(small: TaskSuite) -> None:
    batch = start_batch(
        small, RolloutSettings("scripted", samples=2), task_ids=["task_0013", "task_0001"], enqueue=False
    )
    assert sorted(batch.trajectories.values_list("task_ref", "sample_index")) == [
        ("task_0001", 0),
        ("task_0001", 1),
        ("task_0013", 0),
        ("task_0013", 1),
    ]
    with pytest.raises(RolloutError, match="suite small has no task 'task_0999'"):
        start_batch(small, RolloutSettings("scripted"), task_ids=["task_0001", "task_0999"], enqueue=False)
    assert RolloutBatch.objects.count() == 1


def test_the_launch_form_launches_on_the_tasks_it_names(small: TaskSuite, researcher: User) -> None:
    status, _ = launch(researcher, tasks=" task_0008 , task_0008,")
    assert status == 302
    batch = RolloutBatch.objects.get()
    assert list(batch.trajectories.values_list("task_ref", flat=True)) == ["task_0008", "task_0008"]


def test_the_task_page_offers_a_prefilled_launch(small: TaskSuite, researcher: User) -> None:
    client = client_for(researcher)
    page = client.get("/tasks/small/task_0008/").content.decode()
    assert 'id="roll-out-task"' in page and "/batches/?suite=small&amp;tasks=task_0008#launch" in page
    form = client.get("/batches/?suite=small&tasks=task_0008").content.decode()
    assert 'name="tasks" value="task_0008"' in form
    assert '<option value="small" selected>' in form


def test_a_missing_model_directory_is_an_error_on_the_form_and_nothing_is_queued(
    small: TaskSuite, researcher: User, tmp_path: Path
) -> None:
    status, page = launch(researcher, policy="hf", model=str(tmp_path / "no-such-model"))
    assert status == 400 and "no model directory at" in page and "no-such-model" in page
    (tmp_path / "not-a-model").mkdir()
    status, page = launch(researcher, policy="hf", model=str(tmp_path / "not-a-model"))
    assert status == 400 and "has no config.json" in page
    assert not RolloutBatch.objects.exists() and not Trajectory.objects.exists()
    # The bundled model (the default when no model is named) passes the check.
    if (Path(settings.CRUCIBLE_DEFAULT_MODEL) / "config.json").is_file():
        status, _ = launch(researcher, policy="hf", tasks="task_0001")
        assert status == 302 and RolloutBatch.objects.get().model == str(settings.CRUCIBLE_DEFAULT_MODEL)


class Models(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        body = json.dumps({"object": "list", "data": [{"id": "served-model", "object": "model"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_launch_form_asks_the_openai_server_before_queueing(
    small: TaskSuite, researcher: User, server: str
) -> None:
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    status, page = launch(researcher, policy="openai", model="served-model", base_url=dead)
    assert status == 400 and "cannot reach model server http://127.0.0.1:9/v1" in page
    status, page = launch(researcher, policy="openai", model="other-model", base_url=server)
    assert status == 400 and "does not serve &#x27;other-model&#x27; (it serves: served-model)" in page
    assert not RolloutBatch.objects.exists()
    status, _ = launch(researcher, policy="openai", model="served-model", base_url=f"{server}/v1/", tasks="task_0001")
    assert status == 302 and RolloutBatch.objects.get().trajectories.count() == 2


def test_the_rollout_command_runs_only_the_tasks_named(small: TaskSuite) -> None:
    call_command("rollout", "--suite", "small", "--policy", "scripted", "--task", "task_0008", verbosity=0)
    (trajectory,) = Trajectory.objects.all()
    assert trajectory.task_ref == "task_0008" and trajectory.status == "finished"
    with pytest.raises(CommandError, match="no task 'nope'"):
        call_command("rollout", "--suite", "small", "--policy", "scripted", "--task", "nope", verbosity=0)
