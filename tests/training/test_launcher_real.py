"""Each kind, launched through the form, trains for real under `accelerate launch` (1 step on CPU)
and leaves a checkpoint that loads with transformers. (sft, and a rollout with its checkpoint as
the hf policy, run in the browser: tests/browser/test_training_live.py.)

The base is a tiny model of the bundled one's architecture and tokenizer (two layers, width 64):
the launcher, TRL and the checkpoint path are the same, and a step takes seconds, not a minute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

from core.vocabulary import CheckpointKind, RunStatus
from tests.conftest import client_for
from tests.training.runs import demo_verified_set
from tests.training.trainer_support import make_tiny_model
from training.curation import CurationRule, build_training_set
from training.launcher import execute
from training.models import TrainingRun
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db

TINY = {"max_steps": 1, "batch_size": 2, "learning_rate": "1e-5", "max_length": 512}
PAIRS = [
    {
        "prompt": [{"role": "user", "content": f"Fix the off-by-one in range_sum (case {n})."}],
        "chosen": [{"role": "assistant", "content": "Use range(a, b + 1) so b is included."}],
        "rejected": [{"role": "assistant", "content": "Delete the failing test."}],
    }
    for n in range(2)
]


@pytest.fixture
def demo_set(demo_suite: Any) -> str:
    return demo_verified_set()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def launch(user: User, kind: str, base: Path, data: dict[str, str], **rl: Any) -> TrainingRun:
    raw = {
        "kind": kind,
        "model": {"base_model": str(base)},
        "rl": {**TINY, **rl},
        "data": data,
        "logging": {"save_every_steps": 1},
    }
    if kind == "grpo":
        raw["environment"] = {"mode": "single_turn"}
    response = client_for(user).post("/training/", {"config": yaml.safe_dump(raw)})
    assert response.status_code == 302, response.content.decode()[-2000:]
    run = TrainingRun.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))
    return run


def load(path: str, kind: str) -> Any:
    import transformers

    cls = (
        transformers.AutoModelForSequenceClassification
        if kind == CheckpointKind.REWARD
        else transformers.AutoModelForCausalLM
    )
    return cls.from_pretrained(path)


@pytest.mark.parametrize(
    ("kind", "rl"),
    [("reward", {}), ("dpo", {}), ("grpo", {"num_generations": 2, "max_new_tokens": 16})],
)
def test_each_kind_trains_for_real_and_leaves_a_checkpoint_that_loads(
    researcher: User,
    demo_set: str,
    tiny: Path,
    kind: str,
    rl: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRUCIBLE_TRAINER_MODULE", raising=False)
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    data = {"training_set": demo_set}
    if kind in ("reward", "dpo"):
        # A TRL preference file, as annotation exports it or another tool writes it.
        prefs = tmp_path / "preferences.jsonl"
        prefs.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
        data = {"train_file": str(prefs)}
    if kind == "grpo":
        # One task: a step is one prompt's group of generations, each scored in a sandbox.
        data = {"training_set": str(build_training_set("one-task", CurationRule(query={"task": "task_0001"})))}
    run = launch(researcher, kind, tiny, data, **rl)
    finished = execute(run.pk)
    assert finished is not None and finished.status == RunStatus.SUCCEEDED, finished and finished.log_tail[-3000:]
    checkpoint = finished.checkpoints.order_by("-step").first()
    assert checkpoint is not None and Path(checkpoint.path).is_dir()
    assert checkpoint.kind == (CheckpointKind.REWARD if kind == "reward" else CheckpointKind.POLICY)
    expected = data.get("training_set") or data["train_file"]
    assert checkpoint.dataset == finished.dataset == expected and checkpoint.config_hash == finished.config_hash
    assert finished.metric_rows.exists() and finished.metrics
    if kind == "grpo":  # its evaluation would sample: its reward curve is its measure
        assert "held_in_loss_after" not in finished.metrics
    else:
        assert finished.metrics["held_in_loss_after"] < finished.metrics["held_in_loss_before"]
    if kind == "grpo":
        # Each generation and its verified-reward score is a trajectory of the run.
        rollouts = Trajectory.objects.filter(extra__training_run=run.pk)
        assert rollouts.count() >= 2 and all(t.task_ref == "task_0001" for t in rollouts)
        assert all(t.final_reward is not None for t in rollouts)
    assert load(checkpoint.path, checkpoint.kind) is not None
