"""`make run` starts one Celery worker per class of work (scripts/workers.sh, sourced by scripts/run.sh)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


def start_stub_workers(tmp_path: Path, **env: str) -> list[list[str]]:
    """Run start_workers with a `celery` that only records its arguments; each call's argv."""
    stub = tmp_path / "bin" / "celery"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "CONCURRENCY=$CRUCIBLE_WORKER_CONCURRENCY" "$@" > "$CALLS/$$"\n')
    stub.chmod(0o755)
    calls = tmp_path / "calls"
    calls.mkdir()
    (tmp_path / "var" / "log").mkdir(parents=True)
    script = f'set -euo pipefail; BIN="{stub.parent}"; . "{REPO}/scripts/workers.sh"; start_workers; wait'
    subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env={**os.environ, "CALLS": str(calls), **env}, check=True, timeout=10
    )
    return [path.read_text().splitlines() for path in sorted(calls.iterdir(), key=lambda p: p.stat().st_mtime_ns)]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_run_sources_the_worker_script_and_stops_the_workers_on_exit() -> None:
    run = (REPO / "scripts" / "run.sh").read_text()
    assert ". scripts/workers.sh" in run and "trap stop_workers EXIT INT TERM" in run
    assert run.index("start_workers") > run.index("trap stop_workers")
    assert "-Q default,rollouts,rewards,training" not in run


def test_it_starts_a_worker_per_class_each_with_its_queues_name_and_log(tmp_path: Path) -> None:
    calls = start_stub_workers(tmp_path, CRUCIBLE_ROLLOUT_CONCURRENCY="3")
    by_queues = {option(argv, "-Q"): argv for argv in calls}
    assert set(by_queues) == {"rollouts,rewards", "training", "default"}
    assert [option(by_queues[q], "--concurrency") for q in ("rollouts,rewards", "training", "default")] == [
        "3",
        "1",
        "1",
    ]
    assert [by_queues[q][0] for q in ("rollouts,rewards", "training", "default")] == [
        "CONCURRENCY=3",
        "CONCURRENCY=1",
        "CONCURRENCY=1",
    ]
    assert sorted(option(argv, "-n") for argv in calls) == ["default@%h", "rollouts@%h", "training@%h"]
    assert len({option(argv, "--logfile") for argv in calls}) == 3


def test_rollout_processes_follow_the_cores_when_not_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRUCIBLE_ROLLOUT_CONCURRENCY", raising=False)
    calls = start_stub_workers(tmp_path, ROLLOUT_PROCESS_MIB="1")  # memory never the limit
    rollouts = next(argv for argv in calls if option(argv, "-Q") == "rollouts,rewards")
    assert option(rollouts, "--concurrency") == str(max(1, (os.cpu_count() or 2) - 1))


def test_rollout_processes_are_fewer_where_memory_holds_fewer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRUCIBLE_ROLLOUT_CONCURRENCY", raising=False)
    calls = start_stub_workers(tmp_path, ROLLOUT_PROCESS_MIB=str(1 << 30))  # a process bigger than any machine
    rollouts = next(argv for argv in calls if option(argv, "-Q") == "rollouts,rewards")
    assert option(rollouts, "--concurrency") == "1"
