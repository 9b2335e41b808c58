"""A run that cannot train says why and what to change: no rows to train on, a trainer the kernel killed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core.vocabulary import RunStatus
from tests.training.runs import config, scored
from training.curation import CurationRule, build_training_set
from training.launcher import SIGKILLED, execute, killed_error
from training.services import RunError, create_run

pytestmark = pytest.mark.django_db


def test_a_trainer_killed_by_sigkill_fails_saying_it_was_probably_out_of_memory(
    fake_trainer: Callable[..., None],
) -> None:
    scored("task_a", True)
    build_training_set("oracle", CurationRule())
    fake_trainer("sigkill")
    run = create_run(config("sft"), enqueue=False)
    finished = execute(run.pk)
    assert finished is not None and finished.status == RunStatus.FAILED
    assert finished.error.startswith("the trainer was killed by SIGKILL")
    assert "probably out of memory" in finished.error and "lower rl.batch_size or rl.max_length" in finished.error


def test_accelerates_word_for_a_killed_trainer_counts_as_sigkill_and_the_kernels_count_is_named() -> None:
    tail = ["Traceback (most recent call last):", f"subprocess.CalledProcessError: Command '[...]' {SIGKILLED}."]
    error = killed_error(1, tail, kills_before=2, kills_after=3)
    assert "killed by SIGKILL (the kernel counted 1 OOM kill(s)" in error and "probably out of memory" in error
    assert killed_error(3, ["RuntimeError: bad"], None, None) == ""  # a plain failure is not called a kill


def test_a_set_without_successes_gives_sft_no_rows_and_says_what_to_freeze() -> None:
    scored("task_a", False)
    build_training_set("oracle", CurationRule())
    with pytest.raises(RunError, match="none of its trajectories has a verified reward that resolved its task"):
        create_run(config("sft"), enqueue=False)
    with pytest.raises(RunError, match="no task has two trajectories with different verified rewards"):
        create_run(config("dpo"), enqueue=False)
