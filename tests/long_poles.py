"""The suite's long poles first, one share per xdist worker, so the run does not end waiting on one.

pytest-xdist's work-stealing scheduler hands each worker a contiguous slice of the collected
tests, by count. A slice that happens to end with a 60 s test (a real training run, a history
validation) makes every other worker idle at the end. Ordered here instead: the known long poles
(LONG_POLES, seconds as measured by `make test`'s slowest-tests list on a 2-core box) are spread
over the slices so each slice's known seconds are about even (longest first), each slice starts
with its poles, and the rest of the tests fill the slices in collection order.

Tests that share a costly session fixture (TOGETHER: the bundled model behind `transformers serve`)
go to one slice as one unit, so one worker pays for the fixture once instead of each that meets one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

# nodeid prefix -> seconds (the slowest tests of a CI run; update when they move)
LONG_POLES: dict[str, float] = {
    "tests/envserver/test_openenv_client.py::test_twenty_concurrent": 40,
    "tests/envserver/test_trl_adapter.py::test_a_tiny_grpo_run": 25,
    "tests/tasks/test_builders.py::test_the_demo_history_yields_valid_tasks": 52,
    "tests/reliability/test_command_beside_workers.py::test_on_sqlite": 43,
    "tests/browser/test_first_hour.py::": 300,
    "tests/tasks/test_demo_tasks.py::test_every_demo_task_fails_before": 20,
    "tests/reliability/test_two_instances.py::test_two_instances": 42,
    "tests/trajectories/test_rollouts.py::test_the_scripted_policy_solves_every_demo_task": 34,
    "tests/tasks/test_real_history.py::test_chosen_sqlparse_commits": 56,
    "tests/trajectories/test_llm_rollouts.py::test_the_bundled_model_completes": 19,
    "tests/trajectories/test_llm_rollouts.py::test_an_openai_compatible_server": 34,
    "tests/training/test_launcher_real.py::test_each_kind_trains_for_real": 20,
    "tests/training/test_trainers.py::test_sft_runs_as_a_subprocess": 41,
    "tests/trajectories/test_jsonl.py::test_import_and_export_work_on_sqlite_too": 37,
    "tests/rewards/test_bulk_scoring.py::test_score_imported_verifies_a_thousand": 47,
    "tests/reliability/test_under_load.py::test_a_scripted_batch_under_load": 39,
    "tests/evaluation/test_adversarial.py::test_the_suite_validates_as_designed": 25,
    "tests/webapp/test_redis_restart.py::test_a_redis_restart_mid_batch": 40,
    "tests/webapp/test_redis_restart.py::test_a_batch_launched_from_the_web": 15,
    "tests/tasks/test_synth_and_splits.py::test_synth_tasks_yields_twenty": 36,
    "tests/reliability/test_worker_killed_mid_rollout.py::": 23,
    "tests/training/test_trainers_grpo.py::": 30,
    "tests/tasks/test_parallel_validation.py::": 18,
    "tests/browser/test_live_resync.py::": 17,
    "tests/reliability/test_stopped_mid_step.py::": 14,
    "tests/tasks/test_rewrite_statements.py::": 13,
    "tests/rewards/test_service.py::test_the_sanity_check_shows_the_reward_gap": 14,
    "tests/tasks/test_rewrite_statements.py::test_the_bundled_model_rewrites": 30,
    "tests/trajectories/test_policies_llm.py::test_openai_policy_against_transformers_serve": 10,
    "tests/training/test_lora.py::test_a_lora_sft_run_saves_an_adapter": 45,
    "tests/training/test_lora.py::test_a_grpo_run_trains_adapters": 33,
    "tests/training/test_lora.py::test_dpo_and_reward_runs_train_adapters_only[dpo": 28,
    "tests/training/test_ddp.py::test_two_processes_train_one_run": 20,
    "tests/evaluation/test_during_training.py::test_each_saved_checkpoint_is_evaluated": 45,
    "tests/training/test_resume.py::test_a_killed_run_resumes": 30,
}
# Units of poles kept in one slice: the tests of the session fixture `model_server` (tests/conftest.py).
TOGETHER: tuple[tuple[str, ...], ...] = (
    (
        "tests/trajectories/test_llm_rollouts.py::test_an_openai_compatible_server",
        "tests/tasks/test_rewrite_statements.py::test_the_bundled_model_rewrites",
        "tests/trajectories/test_policies_llm.py::test_openai_policy_against_transformers_serve",
    ),
)


class Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=Item)


def known_seconds(nodeid: str) -> float:
    return max((s for prefix, s in LONG_POLES.items() if nodeid.startswith(prefix)), default=0.0)


def slice_sizes(count: int, workers: int) -> list[int]:
    """How many tests xdist's first distribution sends each worker (worksteal.check_schedule)."""
    sizes, left = [], count
    for index in range(workers):
        sizes.append(left // (workers - index))
        left -= sizes[-1]
    return sizes


def poles_first(items: Sequence[T], workers: int) -> list[T]:
    """`items` reordered so each of `workers` contiguous slices starts with its share of the poles."""
    sizes = slice_sizes(len(items), workers)
    units = pole_units([i for i in items if known_seconds(i.nodeid)])
    units.sort(key=lambda unit: -sum(known_seconds(i.nodeid) for i in unit))
    chosen: list[list[T]] = [[] for _ in sizes]
    loads = [0.0] * workers
    for unit in units:  # longest first, each to the least loaded slice with room
        room = [w for w in range(workers) if len(chosen[w]) + len(unit) <= sizes[w]]
        target = min(room, key=lambda w: loads[w])
        chosen[target] += unit
        loads[target] += sum(known_seconds(item.nodeid) for item in unit)
    placed = {id(item) for unit in units for item in unit}
    rest = iter(item for item in items if id(item) not in placed)
    ordered: list[T] = []
    for worker, size in enumerate(sizes):
        ordered += chosen[worker]
        ordered += [next(rest) for _ in range(size - len(chosen[worker]))]
    return ordered


def pole_units(poles: Sequence[T]) -> list[list[T]]:
    """The poles as units to place: each TOGETHER group that is there as one, every other pole alone."""
    units: list[list[T]] = []
    grouped: set[int] = set()
    for group in TOGETHER:
        unit = [item for item in poles if item.nodeid.startswith(group)]
        if unit:
            units.append(unit)
            grouped |= {id(item) for item in unit}
    return units + [[item] for item in poles if id(item) not in grouped]
