from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation import pairs
from annotation.models import Comparison, ComparisonSet
from annotation.pairs import PairRequest, PairsError, draw_pairs, patch_fingerprint, register_source
from tests.annotation.pairs_data import diff, scored, suite_with_pairs
from tests.factories import SuiteFactory, TaskFactory, UserFactory
from trajectories.models import RolloutBatch, Trajectory

pytestmark = pytest.mark.django_db


def request(**kw: object) -> PairRequest:
    base: dict[str, object] = {"name": "s1", "suite": "pairs-suite", "strategy": "random", "max_pairs": 100}
    return PairRequest(**{**base, **kw})  # type: ignore[arg-type]


def pair_keys(cset: ComparisonSet) -> list[str]:
    return list(cset.comparisons.order_by("position").values_list("pair_key", flat=True))


def test_patches_that_differ_only_in_whitespace_context_or_index_lines_are_the_same_patch() -> None:
    one = diff("    return 1")
    spaced = one.replace("+    return 1", "+    return  1 ").replace("--- a/", "index 1234abc..5678def 100644\n--- a/")
    more_context = one.replace("@@ -1,2 +1,2 @@\n def f():\n", "@@ -1,1 +1,1 @@\n")
    reindented = one + " x = 1\n-  y = 2\n+    y = 2\n"
    assert patch_fingerprint(one) == patch_fingerprint(spaced) == patch_fingerprint(more_context)
    assert patch_fingerprint(one) == patch_fingerprint(reindented)
    assert patch_fingerprint(one) != patch_fingerprint(diff("    return 2"))
    assert patch_fingerprint("") == patch_fingerprint("  \n") == ""
    assert patch_fingerprint(diff("    return 0")) == ""  # removes a line and adds it back: no change


def test_random_pairs_cover_every_task_once_and_record_what_was_drawn() -> None:
    suite_with_pairs(tasks=4, per_task=3)
    cset = draw_pairs(request(per_task=1))
    pairs = list(cset.comparisons.select_related("trajectory_a", "trajectory_b"))
    assert len(pairs) == 4
    assert len({p.task_ref for p in pairs}) == 4
    for p in pairs:
        assert p.trajectory_a.task_ref == p.trajectory_b.task_ref == p.task_ref
        assert p.trajectory_a_id != p.trajectory_b_id
    assert [p.position for p in cset.comparisons.order_by("position")] == [0, 1, 2, 3]
    assert cset.stats["candidates"] == 12
    assert cset.stats["skipped"]["over_per_task_cap"] == 4 * (3 - 1)
    assert cset.source == {"suite": "pairs-suite", "seed": 0, "max": 100}


def test_the_same_seed_draws_the_same_pairs_and_another_seed_other_ones() -> None:
    suite_with_pairs(tasks=6, per_task=4)
    first = pair_keys(draw_pairs(request(name="a", seed=3, max_pairs=8)))
    again = pair_keys(draw_pairs(request(name="b", seed=3, max_pairs=8)))
    other = pair_keys(draw_pairs(request(name="c", seed=4, max_pairs=8)))
    assert first == again
    assert first != other
    assert len(first) == 8 and len(set(first)) == 8


def test_identical_empty_and_unscored_patches_never_make_a_pair() -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    task = TaskFactory.create(suite=suite)
    scored(task, diff("    return 1"))
    scored(task, diff("    return  1"))  # the same patch after normalising
    scored(task, "")
    scored(task, diff("    return 2"), status="running")
    unscored = scored(task, diff("    return 3"), with_reward_row=False)
    Trajectory.objects.filter(pk=unscored.pk).update(scored_at=None)
    with pytest.raises(PairsError, match="no pairs could be drawn.*1 empty patch.*1 identical patches"):
        draw_pairs(request())
    assert not ComparisonSet.objects.exists()
    scored(task, diff("    return 4"))
    cset = draw_pairs(request())
    assert cset.comparisons.count() == 1  # only one of the two identical patches is paired with the new one
    assert cset.stats["excluded"] == {
        "not_finished": 1,
        "not_scored": 1,
        "task_not_in_database": 0,
        "empty_patch": 1,
    }
    assert cset.stats["skipped"]["identical_patches"] == 1
    assert cset.stats["skipped"]["same_two_patches"] == 1


def test_same_outcome_pairs_only_patches_with_equal_verified_test_results() -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    task = TaskFactory.create(suite=suite)
    scored(task, diff("    return 1"), f2p=(2, 2))
    scored(task, diff("    return 2"), f2p=(2, 2))
    scored(task, diff("    return 3"), f2p=(1, 2), success=False, reward=0.5)
    scored(task, diff("    return 4"), f2p=(1, 2), success=False, reward=0.5)
    scored(task, diff("    return 5"), f2p=(0, 2), success=False, reward=0.5)
    cset = draw_pairs(request(strategy="same_outcome", per_task=10))
    got = {
        frozenset((c.trajectory_a.patch.split("return ")[-1][0], c.trajectory_b.patch.split("return ")[-1][0]))
        for c in cset.comparisons.select_related("trajectory_a", "trajectory_b")
    }
    assert got == {frozenset("12"), frozenset("34")}
    assert cset.stats["skipped"]["different_outcome"] == 10 - 2


def test_close_reward_serves_the_closest_pairs_first() -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    for t, rewards in enumerate([(0.0, 1.0), (0.5, 0.6), (0.2, 0.5)]):
        task = TaskFactory.create(suite=suite, task_id=f"close-{t}")
        for i, r in enumerate(rewards):
            scored(task, diff(f"    return {i + 1}"), reward=r)
    cset = draw_pairs(request(strategy="close_reward"))
    gaps = [
        round(abs(c.trajectory_a.final_reward - c.trajectory_b.final_reward), 3)  # type: ignore[operator]
        for c in cset.comparisons.select_related("trajectory_a", "trajectory_b").order_by("position")
    ]
    assert gaps == [0.1, 0.3, 1.0]


def test_checkpoint_pairs_put_side_a_on_a_and_side_b_on_b() -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    old = RolloutBatch.objects.create(suite=suite, policy_kind="hf", model="ckpt-old")
    task = TaskFactory.create(suite=suite)
    for i in range(2):
        scored(task, diff(f"    return {i + 1}"), batch=old, model="ckpt-old")
        scored(task, diff(f"    return {i + 10}"), model="ckpt-new")
    scored(task, diff("    return 99"), model="someone-else")
    cset = draw_pairs(request(strategy="checkpoints", side_a=f"batch:{old.pk}", side_b="model:ckpt-new"))
    pairs = list(cset.comparisons.select_related("trajectory_a", "trajectory_b"))
    assert len(pairs) == 4
    assert {p.trajectory_a.policy_model for p in pairs} == {"ckpt-old"}
    assert {p.trajectory_b.policy_model for p in pairs} == {"ckpt-new"}
    assert cset.source["side_a"] == {"batch": old.pk} and cset.source["side_b"] == {"model": "ckpt-new"}
    assert cset.stats["excluded"]["on_neither_side"] == 1


def test_pairs_can_be_limited_to_a_batch() -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="scripted")
    task = TaskFactory.create(suite=suite)
    inside = {scored(task, diff(f"    return {i}"), batch=batch).pk for i in (1, 2)}
    scored(task, diff("    return 3"))
    cset = draw_pairs(request(batches=(batch.pk,)))
    assert cset.comparisons.count() == 1
    c = cset.comparisons.get()
    assert {c.trajectory_a_id, c.trajectory_b_id} == inside


@pytest.fixture
def training_sets() -> Iterator[dict[str, list[str]]]:
    """A training-set source as training registers it (training sits above annotation)."""
    known: dict[str, list[str]] = {}

    def resolve(name: str) -> list[str]:
        if name not in known:
            raise LookupError(f"no training set named {name!r}")
        return known[name]

    saved = dict(pairs._sources)
    register_source(pairs.TRAINING_SET, resolve)
    yield known
    pairs._sources.clear()
    pairs._sources.update(saved)


def test_pairs_can_be_limited_to_a_training_set(training_sets: dict[str, list[str]]) -> None:
    suite = SuiteFactory.create(name="pairs-suite")
    task = TaskFactory.create(suite=suite)
    members = [scored(task, diff(f"    return {i}")) for i in (1, 2)]
    scored(task, diff("    return 3"))
    training_sets["curated"] = [str(t.trajectory_id) for t in members]
    cset = draw_pairs(request(training_set="curated"))
    c = cset.comparisons.get()
    assert {c.trajectory_a_id, c.trajectory_b_id} == {t.pk for t in members}
    assert cset.source["training_set"] == "curated"
    with pytest.raises(PairsError, match="no training set named 'missing'"):
        draw_pairs(request(name="s2", training_set="missing"))


def test_the_max_is_spread_round_robin_over_tasks() -> None:
    suite_with_pairs(tasks=3, per_task=4)
    cset = draw_pairs(request(max_pairs=5))
    per_task = Counter(cset.comparisons.values_list("task_ref", flat=True))
    assert sorted(per_task.values()) == [1, 2, 2]
    assert cset.stats["skipped"]["over_max"] == 3 * 5 - 5


def test_make_pairs_prints_a_summary_and_writes_the_set() -> None:
    suite_with_pairs(tasks=3, per_task=2)
    out = StringIO()
    call_command(
        "make_pairs", "--suite", "pairs-suite", "--strategy", "random", "--max", "2", "--name", "cli", stdout=out
    )
    assert "comparison set cli: 2 pairs over 2 tasks" in out.getvalue()
    assert ComparisonSet.objects.get(name="cli").comparisons.count() == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope"], "no suite named 'nope'"),
        (["--max", "0"], "--max: the number of pairs must be between"),
        (["--name", "bad name!"], "use letters, digits"),
        (["--batch", "999"], "no rollout batch 999"),
        (["--strategy", "checkpoints"], "needs both sides"),
        (["--side-a", "batch:1"], "--side-a and --side-b: sides A and B belong to the checkpoints strategy"),
        (["--training-set", "x"], "no app registered that source|no training set named"),
        (["--reviewers", "0"], "reviewers per pair"),
    ],
)
def test_make_pairs_refuses_bad_input_with_one_clear_line_and_writes_nothing(args: list[str], message: str) -> None:
    suite_with_pairs(tasks=2, per_task=2)
    base = {"--suite": "pairs-suite", "--strategy": "random", "--max": "5", "--name": "cli"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    with pytest.raises(CommandError, match=message):
        call_command("make_pairs", *[x for kv in base.items() for x in kv])
    assert not ComparisonSet.objects.exists()
    assert not Comparison.objects.exists()


def test_a_set_name_cannot_be_used_twice() -> None:
    suite_with_pairs(tasks=2, per_task=2)
    draw_pairs(request())
    with pytest.raises(PairsError, match="already exists"):
        draw_pairs(request())


def test_researchers_draw_a_set_from_the_browser_and_reviewers_cannot(client: object) -> None:
    from tests.conftest import client_for

    suite_with_pairs(tasks=2, per_task=2)
    researcher = client_for(UserFactory.create(username="rita", role="researcher"))
    reviewer = client_for(UserFactory.create(username="rob", role="reviewer"))
    form = {"name": "web", "suite": "pairs-suite", "strategy": "random", "max_pairs": 10, "reviewers": 2}
    form |= {"per_task": 3, "lock_minutes": 10, "seed": 1}
    assert reviewer.get("/annotation/sets/new/").status_code == 403
    assert reviewer.post("/annotation/sets/new/", form).status_code == 403
    bad = researcher.post("/annotation/sets/new/", {**form, "strategy": "checkpoints"})
    assert bad.status_code == 400 and b"needs both sides" in bad.content
    response = researcher.post("/annotation/sets/new/", form)
    assert response.status_code == 302 and response["Location"] == "/annotation/sets/web/"
    cset = ComparisonSet.objects.get(name="web")
    assert cset.reviewers_per_pair == 2 and cset.lock_seconds == 600 and cset.comparisons.count() == 2
    page = researcher.get("/annotation/sets/web/")
    assert page.status_code == 200 and b"How the pairs were drawn" in page.content
