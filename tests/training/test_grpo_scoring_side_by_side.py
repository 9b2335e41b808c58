"""A generation's patches are scored side by side on a host with cores to spare, and reported in order.

Measured on one H200 (16 cores): scored one after another, 16 patches left the GPU idle for about
7.5 s of each 25 s step.
"""

from __future__ import annotations

import io
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rewards import independence
from tests.training.trainer_support import parse_events
from training.trainers import grpo


class SlowScorer:
    """Scores `diff N` as N/10 after a pause, and records how many scores ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = self.most = 0

    def score(self, task_dir: str, patch: str, termination: str) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return SimpleNamespace(reward=0.0, resolved=False, breakdown={"dir": task_dir}, flags=[])


def _score_all(monkeypatch: pytest.MonkeyPatch, cpus: int) -> tuple[SlowScorer, list[dict[str, Any]], float]:
    """(the scorer, the rollout events, the seconds the reward logged as `score_s`)"""
    monkeypatch.setattr(grpo.os, "cpu_count", lambda: cpus)
    scorer = SlowScorer()
    reward = grpo.reward_function(scorer, "single_turn")  # type: ignore[arg-type]
    dirs = [f"task-{i}" for i in range(6)]
    logged: dict[str, float] = {}
    with redirect_stdout(io.StringIO()) as out:
        got = reward(
            prompts=["p"] * 6, completions=["no diff"] * 6, task_id=dirs, task_dir=dirs, log_metric=logged.__setitem__
        )
    assert got == [0.0] * 6
    return scorer, parse_events(out.getvalue()), logged["score_s"]


def test_a_host_with_cores_to_spare_scores_a_generation_side_by_side_and_reports_it_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scorer, rollouts, score_s = _score_all(monkeypatch, cpus=16)
    assert scorer.most > 1, "the patches were scored one after another"
    assert 0.2 <= score_s < 6 * 0.2  # the step's scoring time, logged for the run page
    # The rollout events keep the completions' order, whatever order the scores finished in.
    assert [r["breakdown"]["dir"] for r in rollouts] == [f"task-{i}" for i in range(6)]


def test_a_two_core_host_scores_one_patch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, _, score_s = _score_all(monkeypatch, cpus=2)
    assert scorer.most == 1
    assert score_s >= 6 * 0.2


def test_score_workers_is_half_the_cores_bounded_by_the_generation_and_a_cap() -> None:
    assert grpo.score_workers(16, cpus=2) == 1
    assert grpo.score_workers(16, cpus=16) == 8
    assert grpo.score_workers(3, cpus=16) == 3
    assert grpo.score_workers(64, cpus=128) == grpo.MAX_SCORE_WORKERS


def test_patches_of_one_task_scored_at_once_share_one_calibration_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runs: list[str] = []

    def calibrate_once(
        task: Any, reference: str, secret: bytes, backend: Any, limits: Any, cache: Any, key: str
    ) -> Any:
        runs.append(key)
        time.sleep(0.2)  # the sandboxed run of the changed tests
        calibration = independence.Calibration()
        independence._remember(cache, key, calibration)
        return calibration

    monkeypatch.setattr(independence, "_calibrate", calibrate_once)
    monkeypatch.setattr(independence, "_MEMO", {})
    task = SimpleNamespace(
        task_id="t1", fail_to_pass=["tests/test_a.py::test_a"], tests_dest="tests", base_dir=tmp_path
    )
    monkeypatch.setattr(independence, "_cache_key", lambda task, patch, secret: f"{task.task_id}:{patch}")
    results: list[Any] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(independence.calibrate(task, "diff", b"s", "bwrap", None, None))  # type: ignore[arg-type]
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs == ["t1:diff"]
    assert len(results) == 4 and all(r is results[0] for r in results)
