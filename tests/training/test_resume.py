"""A run killed after a checkpoint goes on as if it had never stopped: same optimizer, same data.

The tiny model trains for real (tests/training/trainer_support.py). One run goes to the end
without stopping; another is killed (SIGKILL, as a lost worker's trainer is) somewhere after its
first checkpoint and resumed from the last checkpoint it reported, as `resume_run` does. The
resumed run must end with the same weights and the same Adam moments as the one that never
stopped. Resumed from the same checkpoint's weights alone, it does not: that is what the
comparison can tell apart.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.training.trainer_support import (
    make_tiny_model,
    of,
    parse_events,
    run_config,
    short_sft_rows,
    train_in_process,
    write_jsonl,
)
from training.trainers.resume import is_state_file, plan, prune_states, saved_step

STEPS = 12
REPO = Path(__file__).resolve().parents[2]


def _tensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _moments(path: Path) -> list[Any]:
    import torch

    state = torch.load(path / "optimizer.pt", weights_only=True)["state"]
    return [state[key][name] for key in sorted(state) for name in ("exp_avg", "exp_avg_sq")]


def _same(left: list[Any], right: list[Any]) -> bool:
    import torch

    if len(left) != len(right):
        return False
    return all(torch.allclose(a, b, rtol=1e-5, atol=1e-8) for a, b in zip(left, right, strict=True))


def _killed_after_a_checkpoint(run_dir: Path) -> tuple[int, list[dict[str, Any]]]:
    """Start the trainer, SIGKILL it once it has reported a checkpoint; its exit code and events."""
    child = subprocess.Popen(
        [sys.executable, "-m", "training.trainers", str(run_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert child.stdout is not None
    seen = []
    for line in child.stdout:
        seen.append(line)
        if '"checkpoint"' in line:
            child.send_signal(signal.SIGKILL)
            break
    seen.append(child.stdout.read())  # what it reported before the kill landed
    code = child.wait(timeout=120)
    return code, parse_events("".join(seen))


def _resume_config(run_dir: Path, checkpoint: dict[str, Any]) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    config["model"]["base_model"] = checkpoint["path"]
    config["resume"] = {"checkpoint_id": 1, "step": checkpoint["step"]}
    (run_dir / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_a_killed_run_resumes_with_the_optimizer_state_and_data_position_it_saved(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "sft.jsonl", short_sft_rows())
    rl = {"max_steps": STEPS, "batch_size": 1}  # a row a step: the data position shows in the weights

    whole = tmp_path / "whole"
    run_config(whole, "sft", tiny, data, rl)
    code, events = train_in_process(whole)
    assert code == 0
    end = whole / "out" / f"checkpoint-{STEPS}"
    # Only the newest checkpoint keeps the training state; the others keep their weights.
    assert saved_step(end) == STEPS
    for step in range(1, STEPS):
        kept = [p.name for p in (whole / "out" / f"checkpoint-{step}").iterdir()]
        assert "model.safetensors" in kept and not any(is_state_file(name) for name in kept), (step, kept)

    killed = tmp_path / "killed"
    run_config(killed, "sft", tiny, data, rl)
    code, after_first = _killed_after_a_checkpoint(killed)
    assert code == -signal.SIGKILL
    last = max(of(after_first, "checkpoint"), key=lambda e: e["step"])
    assert last["step"] < STEPS, "the trainer ended before the kill; nothing was resumed"
    assert saved_step(Path(last["path"])) == last["step"]

    _resume_config(killed, last)
    code, events = train_in_process(killed)
    assert code == 0
    # The run's steps go on from the checkpoint, in the run's own directory.
    assert [e["step"] for e in of(events, "metric")] == list(range(last["step"] + 1, STEPS + 1))
    resumed_end = killed / "out" / f"checkpoint-{STEPS}"
    assert of(events, "checkpoint")[-1]["path"] == str(resumed_end)
    assert _same(_moments(resumed_end), _moments(end))
    whole_weights, resumed_weights = _tensors(end), _tensors(resumed_end)
    assert _same([resumed_weights[k] for k in sorted(whole_weights)], [whole_weights[k] for k in sorted(whole_weights)])

    # The same checkpoint's weights alone (its state gone, as on a host it was fetched to) do not
    # reach the same place: a fresh optimizer, and the data from its start again.
    alone = tmp_path / "alone"
    run_config(alone, "sft", tiny, data, rl)
    weights_only = tmp_path / "weights-only" / Path(last["path"]).name
    shutil.copytree(last["path"], weights_only, ignore=lambda _d, names: [n for n in names if is_state_file(n)])
    _resume_config(alone, {"path": str(weights_only), "step": last["step"]})
    code, events = train_in_process(alone)
    assert code == 0
    assert [e["step"] for e in of(events, "metric")] == list(range(last["step"] + 1, STEPS + 1))
    # The Trainer counts from 1 again: its checkpoints go where they overwrite none of the run's.
    alone_end = alone / "out" / f"after-step-{last['step']}" / f"checkpoint-{STEPS - last['step']}"
    assert of(events, "checkpoint")[-1] == {**of(events, "checkpoint")[-1], "step": STEPS, "path": str(alone_end)}
    assert not _same(_moments(alone_end), _moments(end))


def test_a_resume_plan_reads_what_the_checkpoint_holds(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    out = tmp_path / "out"
    assert plan(None, checkpoint, out, 10).max_steps == 10
    weights_only = plan({"step": 3}, checkpoint, out, 10)
    assert (weights_only.max_steps, weights_only.step_offset, weights_only.state) == (7, 3, None)
    assert weights_only.output_dir == out / "after-step-3"
    (checkpoint / "optimizer.pt").write_bytes(b"x")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    full = plan({"step": 3}, checkpoint, out, 10)
    assert (full.max_steps, full.step_offset, full.state, full.output_dir) == (10, 0, checkpoint, out)
    # A state of another step is not this resume's: weights only.
    assert plan({"step": 2}, checkpoint, out, 10).state is None
    for bad in ("3", -1, True, 2.5):
        with pytest.raises(ValueError, match="config.resume.step"):
            plan({"step": bad}, checkpoint, out, 10)


def test_pruning_keeps_the_newest_state_and_every_weight(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for directory in (out / "checkpoint-1", out / "checkpoint-2", out / "after-step-2" / "checkpoint-1"):
        directory.mkdir(parents=True)
        for name in ("model.safetensors", "optimizer.pt", "rng_state_1.pth", "trainer_state.json", "config.json"):
            (directory / name).write_text(name)
    prune_states(out, keep=out / "after-step-2" / "checkpoint-1")
    assert sorted(p.name for p in (out / "checkpoint-1").iterdir()) == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in (out / "checkpoint-2").iterdir()) == ["config.json", "model.safetensors"]
    assert len(list((out / "after-step-2" / "checkpoint-1").iterdir())) == 5
