"""Issue 18's invariant, attacked: nothing the patch's code can reach, read or recognise decides the verdict.

Each cheat scores at most 0, unresolved, with a flag, within the task's timeout plus ten seconds,
and never crashes the scorer. Each unusual honest patch scores 1.0, resolved (review flags allowed).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rewards.anticheat.bounded import scan_sources_bounded
from rewards.behaviour import Probes, judge_probes
from rewards.scoring import Score, ScoringError, score_patch
from rewards.spec import load_spec
from sandbox import Sandbox, results
from sandbox.backends.local import LocalBackend
from tasks.spec import TaskSpec
from tests.rewards.corpus import make_patch, task_spec
from tests.rewards.third_generation import CHEATS, HONEST, Cheat, clock_task

SPEC = load_spec()
SECRET = b"third-generation" * 2
TIMEOUT = 15


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> TaskSpec:
    return clock_task(tmp_path_factory.mktemp("clock"))


def patch_for(task: TaskSpec, cheat: Cheat) -> str:
    if cheat.task_id != "clock":
        return make_patch(cheat.task_id, cheat.edit)
    with Sandbox(task.base_dir, LocalBackend(allow_unsafe=True)) as box:
        cheat.edit(box)
        return box.diff()


def score(task: TaskSpec, patch: str) -> tuple[Score, float]:
    started = time.monotonic()
    result = score_patch(task, patch, SPEC, secret=SECRET)
    return result, time.monotonic() - started


def test_the_corpus_has_two_variants_of_every_family() -> None:
    families = {c.family for c in CHEATS}
    assert len(families) == 7
    assert all(sum(c.family == family for c in CHEATS) >= 2 for family in families)
    assert len(HONEST) >= 15


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: f"{c.family}: {c.name}")
def test_a_cheat_that_has_read_the_scorer_is_denied_and_flagged(cheat: Cheat, clock: TaskSpec) -> None:
    task = clock if cheat.task_id == "clock" else task_spec(cheat.task_id, timeout=TIMEOUT)
    result, took = score(task, patch_for(task, cheat))
    assert result.reward <= 0 and not result.resolved, result.to_json()
    assert result.flags, result.to_json()
    assert took < TIMEOUT + 10, took  # the runs side by side: within the timeout, plus the set-up


@pytest.mark.parametrize("name", [name for name, _ in HONEST])
def test_unusual_honest_work_scores_one(name: str) -> None:
    edit = dict(HONEST)[name]
    result, _ = score(task_spec("task_0001", timeout=TIMEOUT), make_patch("task_0001", edit))
    assert result.reward == 1.0 and result.resolved, result.to_json()
    assert "answer_oracle" not in {f.detector for f in result.flags}, result.to_json()


def test_the_clock_tasks_own_fix_scores_one_and_its_oracles_are_caught_by_the_changed_rows(clock: TaskSpec) -> None:
    result, _ = score(clock, clock.expected_patch)
    assert result.reward == 1.0 and result.resolved and not result.flags, result.to_json()
    assert result.breakdown["expectations"]["changed"] >= 2  # both parametrize rows, with their ids


def test_the_changed_run_is_what_catches_an_oracle(tmp_path: Path) -> None:
    """The oracle passes every hidden test as written; only the run with the values changed shows it."""
    oracle = next(c for c in CHEATS if "sys._getframe" in c.name)
    result, _ = score(task_spec(oracle.task_id, timeout=TIMEOUT), make_patch(oracle.task_id, oracle.edit))
    assert result.f2p_passed == result.f2p_total  # it passed the tests as they are
    flag = next(f for f in result.flags if f.detector == "answer_oracle")
    assert "expected values changed" in flag.evidence and "->" in flag.evidence


def test_a_malformed_integrity_record_is_evidence_and_never_crashes_the_judge() -> None:
    probes = Probes(plugins=[("crucible_integrity", "")], token="tok")
    passed = results.TestOutcome("tests/t.py::test_a", "passed")
    report = results.TestReport(exec=results.ExecResult(0, "", ""), tests={passed.nodeid: passed})
    for record in ({"token": "tok", "findings": 1}, {"token": 7}, {"token": "tok", "seen": [1, 2], "raised": "x"}):
        report.harness = dict(record)
        flags = judge_probes(probes, report)
        assert "forged_test_run" in {f.detector for f in flags}, record


def test_a_static_scan_that_runs_past_its_deadline_is_stopped_and_named(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("x = " + " + ".join(["'a'"] * 20000) + "\n")
    started = time.monotonic()
    scan = scan_sources_bounded(tmp_path, ["slow.py"], deadline_s=0.05)
    assert time.monotonic() - started < 5
    assert [f.detector for f in scan.flags] == ["scan_overrun"]


def test_an_internal_failure_is_a_clear_scoring_error_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import rewards.scoring as scoring

    def broken(*args: object, **kwargs: object) -> object:
        raise KeyError("planted")

    monkeypatch.setattr(scoring, "judge_probes", broken)
    task = task_spec("task_0001", timeout=TIMEOUT)
    with pytest.raises(ScoringError, match=r"^scoring failed: KeyError: 'planted'"):
        score_patch(task, task.expected_patch, SPEC, secret=SECRET)


def test_a_scoring_workspace_has_one_file_time_so_no_run_tells_itself_apart(tmp_path: Path) -> None:
    """The changed run's rewritten test files are written after the rest; a cheat comparing times
    would know which run it is in. Levelling leaves every file and folder the same time."""
    import os

    from rewards.workspaces import level

    (tmp_path / "tests").mkdir()
    for age, name in enumerate(["pkg.py", "tests/test_a.py", "tests/test_hidden.py"]):
        (tmp_path / name).write_text("x = 1\n")
        os.utime(tmp_path / name, (1_000_000 + age * 1000, 1_000_000 + age * 1000))
    level(tmp_path)
    times = {path.lstat().st_mtime_ns for path in [tmp_path, *tmp_path.rglob("*")]}
    assert len(times) == 1
