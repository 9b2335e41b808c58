"""The long poles are spread over xdist's slices, and the order is a permutation of the tests."""

from __future__ import annotations

from dataclasses import dataclass

from tests.long_poles import known_seconds, poles_first, slice_sizes


@dataclass
class FakeItem:
    nodeid: str


def test_each_slice_starts_with_its_poles_and_nothing_is_lost() -> None:
    poles = [
        "tests/browser/test_first_hour.py::test_a_new_users_first_hour",
        "tests/tasks/test_real_history.py::test_chosen_sqlparse_commits_validate",
        "tests/tasks/test_builders.py::test_the_demo_history_yields_valid_tasks_from_real_commits",
        "tests/rewards/test_bulk_scoring.py::test_score_imported_verifies_a_thousand_trajectories",
    ]
    fast = [f"tests/x/test_{i:03d}.py::test_fast" for i in range(97)]
    items = [FakeItem(n) for n in fast[:50] + poles + fast[50:]]
    ordered = poles_first(items, 4)
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    start = 0
    firsts = []
    for size in slice_sizes(len(items), 4):
        firsts.append(ordered[start].nodeid)
        start += size
    assert sorted(firsts) == sorted(poles)  # one pole at the head of each slice
    assert [i.nodeid for i in ordered if not known_seconds(i.nodeid)] == fast  # the rest keep their order


def test_slices_are_what_xdist_sends() -> None:
    assert slice_sizes(10, 4) == [2, 2, 3, 3] and sum(slice_sizes(1574, 4)) == 1574


def test_the_tests_of_one_costly_fixture_go_to_one_slice() -> None:
    together = [
        "tests/trajectories/test_llm_rollouts.py::test_an_openai_compatible_server_drives_a_real_rollout",
        "tests/tasks/test_rewrite_statements.py::test_the_bundled_model_rewrites_two_statements",
        "tests/trajectories/test_policies_llm.py::test_openai_policy_against_transformers_serve",
    ]
    poles = [
        "tests/tasks/test_real_history.py::test_chosen_sqlparse_commits_validate",
        "tests/tasks/test_builders.py::test_the_demo_history_yields_valid_tasks_from_real_commits",
        "tests/rewards/test_bulk_scoring.py::test_score_imported_verifies_a_thousand_trajectories",
    ]
    fast = [f"tests/x/test_{i:03d}.py::test_fast" for i in range(93)]
    items = [FakeItem(n) for n in fast[:30] + together[:1] + fast[30:60] + poles + together[1:] + fast[60:]]
    ordered = [i.nodeid for i in poles_first(items, 4)]
    assert sorted(ordered) == sorted(i.nodeid for i in items)
    slices, start = [], 0
    for size in slice_sizes(len(items), 4):
        slices.append(ordered[start : start + size])
        start += size
    holding = [s for s in slices if set(together) & set(s)]
    assert len(holding) == 1 and holding[0][:3] == sorted(together, key=together.index), holding
