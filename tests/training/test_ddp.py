"""Several trainer processes on one run: DDP over gloo on the CPU, started as the launcher starts them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.training.trainer_support import BUNDLED, of, parse_events, run_config, write_jsonl
from training.processes import trainer_command, trainer_environment, trainer_processes

REPO = Path(__file__).resolve().parents[2]


def test_two_processes_train_the_bundled_model_as_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    monkeypatch.delenv("CRUCIBLE_ACCELERATE_CONFIG", raising=False)
    monkeypatch.setenv("CRUCIBLE_TRAINER_PROCESSES", "2")
    rows = [
        {"messages": [{"role": "user", "content": f"Add {n} and 1."}, {"role": "assistant", "content": str(n + 1)}]}
        for n in range(4)
    ]
    data = write_jsonl(tmp_path / "sft.jsonl", rows)
    run_config(tmp_path / "run", "sft", BUNDLED, data, {"max_steps": 2, "batch_size": 1, "max_length": 64})
    done = subprocess.run(
        trainer_command(tmp_path / "run"),
        cwd=REPO,
        env={**trainer_environment(), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = parse_events(done.stdout)
    # The Trainer's own process group has both processes; only the main one reports and saves.
    metrics = of(events, "metric")
    assert [m["step"] for m in metrics] == [1, 2] and {m["world_size"] for m in metrics} == {2}
    assert [c["step"] for c in of(events, "checkpoint")] == [1, 2]
    assert of(events, "done") == [{"event": "done", "status": "succeeded"}]
    assert done.stderr.count("sft: max_length 64 (given)") == 2  # each process read the config
    assert sorted(p.name for p in (tmp_path / "run" / "out").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]


def test_the_number_of_processes_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRUCIBLE_TRAINER_PROCESSES", raising=False)
    assert trainer_processes() == 1
    for bad, said in (("two", "not a whole number"), ("0", "between 1 and 64"), ("65", "between 1 and 64")):
        monkeypatch.setenv("CRUCIBLE_TRAINER_PROCESSES", bad)
        with pytest.raises(ImproperlyConfigured, match=said):
            trainer_processes()
    monkeypatch.setenv("CRUCIBLE_TRAINER_PROCESSES", "2")
    monkeypatch.delenv("CRUCIBLE_ACCELERATE_CONFIG", raising=False)
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    command = trainer_command(Path("/runs/3"))
    assert command[command.index("--num_processes") + 1] == "2" and "--cpu" not in command
