"""The checkpoint page draws its lineage (base model → runs → checkpoints → evaluations) and links both ways."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluation.models import EvalRun
from tests.conftest import client_for
from tests.factories import SuiteFactory
from training.checkpoint_queries import lineage
from training.models import Checkpoint, TrainingRun
from trajectories.models import RolloutBatch

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'


def checkpoint(name: str, run: TrainingRun | None = None, parent: Checkpoint | None = None, **kw: object) -> Checkpoint:
    return Checkpoint.objects.create(name=name, path=f"/runs/{name}", run=run, parent=parent, **kw)  # type: ignore[arg-type]


def three_generations() -> tuple[Checkpoint, Checkpoint, Checkpoint]:
    """sft run → its checkpoint → a grpo run resumed from it → its checkpoint → a dpo fine-tune's checkpoint."""
    sft = TrainingRun.objects.create(name="sft-first", kind="sft")
    first = checkpoint("first", sft, base_model="tiny-base", step=10)
    grpo = TrainingRun.objects.create(name="grpo-second", kind="grpo", resume_from=first)
    second = checkpoint("second", grpo, first, step=20)
    dpo = TrainingRun.objects.create(name="dpo-third", kind="dpo", resume_from=second)
    third = checkpoint("third", dpo, second, step=30)
    return first, second, third


def page_of(user: User, c: Checkpoint | int) -> tuple[int, str]:
    pk = c if isinstance(c, int) else c.pk
    response = client_for(user).get(reverse("training:checkpoint", args=[pk]))
    return response.status_code, response.content.decode()


def section(page: str, marker: str) -> str:
    start = page.index(marker)
    return page[start : page.index("</ol>" if "lineage" in marker else "</table>", start)]


def test_the_page_draws_the_lineage_from_the_base_model_to_the_checkpoint_in_order(researcher: User) -> None:
    first, second, third = three_generations()
    status, page = page_of(researcher, third)
    assert status == 200
    graph = section(page, '<ol class="lineage">')
    nodes = [
        'data-node="base"',
        f'data-node="run" data-id="{first.run_id}"',
        f'data-node="checkpoint" data-id="{first.pk}"',
        f'data-node="run" data-id="{second.run_id}"',
        f'data-node="checkpoint" data-id="{second.pk}"',
        f'data-node="run" data-id="{third.run_id}"',
        f'data-node="checkpoint" data-id="{third.pk}"',
    ]
    positions = [graph.index(node) for node in nodes]
    assert positions == sorted(positions)
    assert "tiny-base" in graph
    # Older checkpoints are links; the page's own is marked, not linked.
    assert reverse("training:checkpoint", args=[first.pk]) in graph
    assert 'aria-current="page"' in graph


def test_a_parent_cycle_stops_the_walk_and_is_said(researcher: User) -> None:
    a = checkpoint("loop-a")
    b = checkpoint("loop-b", parent=a)
    Checkpoint.objects.filter(pk=a.pk).update(parent=b)
    a.refresh_from_db()
    walked = lineage(a)
    assert [c.pk for c in walked.chain] == [b.pk, a.pk]
    assert walked.cycle
    status, page = page_of(researcher, a)
    assert status == 200
    assert 'id="lineage-cycle"' in page


def test_a_long_chain_is_cut_at_the_depth_limit(researcher: User) -> None:
    parent = None
    for n in range(6):
        parent = checkpoint(f"gen-{n}", parent=parent)
    assert parent is not None
    walked = lineage(parent, depth=4)
    assert walked.cut and not walked.cycle
    assert [c.name for c in walked.chain] == ["gen-2", "gen-3", "gen-4", "gen-5"]


def test_the_page_shows_data_code_metrics_runs_from_it_and_its_rollout_batches(researcher: User) -> None:
    first, second, _ = three_generations()
    Checkpoint.objects.filter(pk=first.pk).update(
        dataset="sft-set@3", dataset_hash="ab" * 32, code_version="c0ffee1", metrics={"loss": 0.125}
    )
    batch = RolloutBatch.objects.create(suite=SuiteFactory.create(), policy_kind="hf", model=first.path)
    other = RolloutBatch.objects.create(suite=SuiteFactory.create(), policy_kind="hf", model="/elsewhere")
    status, page = page_of(researcher, first)
    assert status == 200
    assert "sft-set@3" in page and "ab" * 32 in page and "c0ffee1" in page and "0.12500" in page
    runs_from = section(page, 'id="runs-from"')
    assert reverse("training:run", args=[second.run_id]) in runs_from
    batches = section(page, 'id="checkpoint-batches"')
    assert reverse("batches:detail", args=[batch.pk]) in batches
    assert reverse("batches:detail", args=[other.pk]) not in batches
    # The run page's action: roll the checkpoint out as the hf policy.
    assert 'class="inline rollout-with"' in page and f'value="{first.path}"' in page


def test_the_page_lists_its_evaluations_with_pass_at_k_and_links_run_and_parent(researcher: User) -> None:
    first, second, _ = three_generations()
    suite = SuiteFactory.create(name="held-out")
    evaluation = EvalRun.objects.create(
        suite=suite,
        policy_kind="hf",
        model=second.path,
        checkpoint=second,
        samples=4,
        k_values=[1, 4],
        temperature=0.8,
        status=EvalRun.Status.SUCCEEDED,
        results={"pass_at_k": {"1": 0.25, "4": 0.75}},
    )
    status, page = page_of(researcher, second)
    assert status == 200
    evals = section(page, 'id="checkpoint-evals"')
    assert reverse("evaluation:detail", args=[evaluation.pk]) in evals
    assert "pass@1 0.250" in evals and "pass@4 0.750" in evals
    graph = section(page, '<ol class="lineage">')
    assert f'data-node="eval" data-id="{evaluation.pk}"' in graph
    assert graph.index(f'data-node="checkpoint" data-id="{second.pk}"') < graph.index('data-node="eval"')
    assert reverse("training:run", args=[second.run_id]) in page
    assert f'href="{reverse("training:checkpoint", args=[first.pk])}"' in section(page, 'id="checkpoint-parent"')
    assert reverse("evaluation:reward-vs-pass", args=[second.run_id]) in page


def test_hostile_names_are_escaped(researcher: User) -> None:
    run = TrainingRun.objects.create(name=HOSTILE, kind="sft", dataset=HOSTILE)
    parent = checkpoint(HOSTILE, run, base_model=HOSTILE, dataset=HOSTILE, code_version=HOSTILE[:60])
    child = checkpoint("child", run, parent, metrics={HOSTILE: 1.0})
    TrainingRun.objects.create(name=HOSTILE, kind="grpo", resume_from=child)
    _, page = page_of(researcher, child)
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_a_missing_checkpoint_is_404_and_roles_are_checked(researcher: User, reviewer: User, outsider: User) -> None:
    assert page_of(researcher, 999_999)[0] == 404
    c = checkpoint("roles")
    status, page = page_of(reviewer, c)
    assert status == 200
    assert "rollout-with" not in page  # rolling out is a researcher's action
    assert page_of(outsider, c)[0] == 403
    assert Client().get(reverse("training:checkpoint", args=[c.pk])).status_code == 302  # to the login page


def queries_for(user: User, c: Checkpoint) -> int:
    client = client_for(user)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("training:checkpoint", args=[c.pk])).status_code == 200
    return len(queries)


def test_the_page_queries_do_not_grow_with_its_evaluations_runs_and_batches(researcher: User) -> None:
    _, second, _ = three_generations()
    before = queries_for(researcher, second)
    suite = SuiteFactory.create()
    for n in range(4):
        batch = RolloutBatch.objects.create(suite=SuiteFactory.create(), policy_kind="hf", model=second.path)
        EvalRun.objects.create(
            suite=suite, policy_kind="hf", checkpoint=second, batch=batch, samples=1, k_values=[1], temperature=0.0
        )
        TrainingRun.objects.create(name=f"more-{n}", kind="grpo", resume_from=second)
    assert queries_for(researcher, second) == before


def test_a_policy_checkpoint_page_opens_the_evaluation_form_filled_in_with_it(researcher: User) -> None:
    policy = checkpoint("policy-one")
    reward = checkpoint("reward-one", kind="reward")
    _, page = page_of(researcher, policy)
    link = f"{reverse('evaluation:list')}?checkpoint={policy.pk}#launch-eval"
    assert f'href="{link}"' in page
    assert 'id="evaluate-checkpoint"' not in page_of(researcher, reward)[1]  # a reward model is no policy
    form = client_for(researcher).get(reverse("evaluation:list"), {"checkpoint": policy.pk}).content.decode()
    assert f'<option value="{policy.pk}" selected>' in form
    # A link with a bad or hostile value opens the empty form, the value never echoed.
    for bad in ("99999", "<script>x</script>", "1" * 500):
        response = client_for(researcher).get(reverse("evaluation:list"), {"checkpoint": bad})
        assert (
            response.status_code == 200
            and " selected>" not in response.content.decode().split('name="checkpoint"')[1].split("</select>")[0]
        )
        assert "<script>x</script>" not in response.content.decode()
