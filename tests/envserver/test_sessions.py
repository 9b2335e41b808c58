"""Sessions as hostile clients meet them: tokens, capacity, bad frames, and clients that vanish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect

from core.tokens import create_token, revoke_token
from core.vocabulary import TrajectorySource
from tests.envserver.conftest import CAPACITY, IDLE_S, REPO, EnvServer, mcp_client
from tests.factories import UserFactory
from trajectories.models import Trajectory


def _ws(server: EnvServer, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(f"ws://127.0.0.1:{server.port}/env/suite/demo/ws", additional_headers=headers, open_timeout=10)


def _ask(ws: Any, message: dict[str, Any] | str) -> dict[str, Any]:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return dict(json.loads(ws.recv(timeout=60)))


def test_a_session_needs_a_researchers_live_token(env_server: EnvServer, env_token: str, demo_tasks: None) -> None:
    _, reviewer_secret = create_token(UserFactory.create(username="rex-reviewer", role="reviewer"), "read only")
    for secret, says in [
        (None, "API token is required"),
        ("crc_nope", "invalid or revoked"),
        (reviewer_secret, "researcher"),
    ]:
        with _ws(env_server, secret) as ws:
            reply = json.loads(ws.recv(timeout=10))
            assert (
                reply["type"] == "error"
                and reply["data"]["code"] == "UNAUTHORIZED"
                and says in reply["data"]["message"]
            )
    rose = UserFactory.create(username="rose", role="researcher")
    token, secret = create_token(rose, "soon revoked")
    with mcp_client(env_server, secret) as env:
        assert env.reset().observation.metadata["task_id"].startswith("task_")
    revoke_token(rose, token.pk)
    # The server answers UNAUTHORIZED and closes with 4401; a client still sending when the close
    # arrives sees the close itself (connection reset) instead of the error frame.
    with pytest.raises((RuntimeError, ConnectionClosedError)) as refused:
        with mcp_client(env_server, secret) as env:
            env.reset()
    if isinstance(refused.value, ConnectionClosedError):
        assert refused.value.rcvd is not None and refused.value.rcvd.code == 4401, refused.value
    else:
        assert "UNAUTHORIZED" in str(refused.value)
    assert Trajectory.objects.filter(source=TrajectorySource.EXTERNAL).count() == 1


def test_hostile_frames_are_refused_and_change_nothing(env_server: EnvServer, env_token: str, demo_tasks: None) -> None:
    with _ws(env_server, env_token) as ws:
        assert _ask(ws, "{not json")["data"]["code"] == "INVALID_JSON"
        assert _ask(ws, {"type": "explode"})["data"]["code"] == "UNKNOWN_TYPE"
        assert _ask(ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "read_file"}})["data"]["code"] == (
            "NO_EPISODE"
        )
        for bad in [
            {"type": "reset", "data": {"task_id": "task_9999"}},
            {"type": "reset", "data": {"task_id": "../../etc"}},
            {"type": "reset", "data": {"policy": "x" * 301}},
            {"type": "reset", "data": {"seed": -1}},
            {"type": "reset", "data": {"max_steps": "many"}},
            {"type": "reset", "data": {"rm": "-rf"}},
            {"type": "reset", "data": {"client": "two\nlines"}},
        ]:
            assert _ask(ws, bad)["type"] == "error", bad
        assert not Trajectory.objects.exists()
        opened = _ask(ws, {"type": "reset", "data": {"seed": 3}})
        episode = opened["data"]["observation"]["metadata"]["episode_id"]
        assert (
            _ask(ws, {"type": "reset", "data": {"seed": 3}})["data"]["observation"]["metadata"]["task_id"]
            == (
                opened["data"]["observation"]["metadata"]["task_id"]  # a seed samples the same task again
            )
        )
        for bad_step in [
            {"type": "step", "data": {"type": "call_tool", "tool_name": 7}},
            {"type": "step", "data": {"type": "call_tool", "tool_name": "read_file", "arguments": []}},
            {"type": "step", "data": {"type": "call_tool", "tool_name": "x" * 65}},
            {"type": "step", "data": {"type": "call_tool", "tool_name": "read_file", "sudo": True}},
            {"type": "step", "data": {"type": "call_tool", "tool_name": "read_file", "metadata": {"thought": 3}}},
        ]:
            assert _ask(ws, bad_step)["type"] == "error", bad_step
        assert _ask(ws, "x" * (1024 * 1024 + 1))["type"] == "error"
        escape = {"type": "call_tool", "tool_name": "read_file", "arguments": {"path": "../../../etc/passwd"}}
        reply = _ask(ws, {"type": "step", "data": escape})["data"]
        assert reply["observation"]["result"].startswith("error:") and not reply["done"]
    # The first episode was abandoned by the second reset, the second by the disconnect; no step but one.
    rows = Trajectory.objects.filter(source=TrajectorySource.EXTERNAL).order_by("created_at")
    _wait(lambda: all(r.status == "cancelled" for r in rows.all()))
    assert str(rows[0].trajectory_id) == episode and rows[0].step_count == 0
    assert rows[1].step_count == 1 and rows[1].steps.get().action_type == "read_file"


def test_capacity_bounds_the_sessions(env_server: EnvServer, env_token: str) -> None:
    with ExitStack() as held:
        for _ in range(CAPACITY):
            held.enter_context(_ws(env_server, env_token))
        _wait(lambda: _active(env_server) == CAPACITY)
        with _ws(env_server, env_token) as extra:
            reply = json.loads(extra.recv(timeout=10))
        assert reply["data"]["code"] == "CAPACITY_REACHED" and reply["data"]["max_sessions"] == CAPACITY
    _wait(lambda: _active(env_server) == 0)


KILLED_CLIENT = """
import json, sys, time
from websockets.sync.client import connect
ws = connect(sys.argv[1], additional_headers={"Authorization": "Bearer " + sys.argv[2]})
ws.send(json.dumps({"type": "reset", "data": {"task_id": "task_0001", "client": "doomed"}}))
ws.recv(timeout=60)
ws.send(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "write_file",
                    "arguments": {"path": "scratch.txt", "content": "half done"}}}))
ws.recv(timeout=60)
print("ready", flush=True)
time.sleep(600)
"""


def test_clients_that_die_or_hang_leave_no_sandbox_after_the_idle_bound(
    env_server: EnvServer, env_token: str, demo_tasks: None
) -> None:
    url = f"ws://127.0.0.1:{env_server.port}/env/suite/demo/ws"
    clients = [
        subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, url, env_token], cwd=REPO, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    try:
        for client in clients:
            assert client.stdout is not None and client.stdout.readline().strip() == b"ready"
        assert len(env_server.leftover_sandboxes()) == 2
        killed, hung = clients
        os.kill(killed.pid, signal.SIGKILL)  # its socket closes with it
        os.kill(hung.pid, signal.SIGSTOP)  # its socket stays open, and silent
        started = time.monotonic()
        _wait(lambda: env_server.leftover_sandboxes() == [], timeout=IDLE_S + 20)
        assert time.monotonic() - started < IDLE_S + 10
        rows = Trajectory.objects.filter(source=TrajectorySource.EXTERNAL)
        _wait(lambda: {r.status for r in rows.all()} == {"cancelled"})
        assert sorted(r.sandbox["ended"] for r in rows) == [
            f"idle for more than {IDLE_S:g} s; the session was closed",
            "the client disconnected",
        ]
        assert all(r.step_count == 1 and "scratch.txt" in r.patch for r in rows)
        # The slot is given back after the episode's row is written: on a busy machine, a moment later.
        _wait(lambda: _active(env_server) == 0)
    finally:
        for client in clients:
            client.kill()
            client.wait()


def _active(server: EnvServer) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/env/suite/demo/health", timeout=5) as response:  # noqa: S310
        return int(json.loads(response.read())["active_sessions"])


def _wait(done: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        time.sleep(0.1)
