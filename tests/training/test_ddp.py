"""Several trainer processes on one run: DDP over gloo on the CPU, started as the launcher starts them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured

from tests.training.trainer_support import make_tiny_model, of, parse_events, run_config, write_jsonl
from training.processes import (
    ResourcesError,
    run_processes,
    trainer_command,
    trainer_environment,
    trainer_processes,
)

REPO = Path(__file__).resolve().parents[2]


def test_two_processes_train_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tiny model of the bundled one's architecture: the same DDP path (process group, sharded
    # batches, one saver); the bundled model's two copies and 1.6 GB saves only cost the suite a minute.
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    monkeypatch.delenv("CRUCIBLE_ACCELERATE_CONFIG", raising=False)
    monkeypatch.delenv("CRUCIBLE_TRAINER_PROCESSES", raising=False)  # the run asks for them itself
    rows = [
        {"messages": [{"role": "user", "content": f"Add {n} and 1."}, {"role": "assistant", "content": str(n + 1)}]}
        for n in range(4)
    ]
    data = write_jsonl(tmp_path / "sft.jsonl", rows)
    config = run_config(
        tmp_path / "run",
        "sft",
        make_tiny_model(tmp_path / "tiny"),
        data,
        {"max_steps": 2, "batch_size": 1, "max_length": 64},
        resources={"processes": 2, "nodes": 1, "strategy": "ddp"},
    )
    done = subprocess.run(
        trainer_command(tmp_path / "run", run_processes(config)),
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


def test_a_run_asks_for_its_processes_and_the_worker_refuses_more_than_it_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRUCIBLE_ACCELERATE_CONFIG", raising=False)
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    monkeypatch.setenv("CRUCIBLE_TRAINER_PROCESSES", "1")  # the worker's default; the run's word wins
    cores = os.cpu_count() or 1
    command = trainer_command(Path("/runs/4"), cores)
    assert command[command.index("--num_processes") + 1] == str(cores)
    with pytest.raises(
        ResourcesError, match=f"resources.processes is {cores + 1}, but this worker has {cores} CPU cores"
    ):
        trainer_command(Path("/runs/4"), cores + 1)
    # The launcher's other way in (the trainer module run by Python) is refused the same way.
    monkeypatch.setenv("CRUCIBLE_TRAINING_LAUNCHER", "python")
    with pytest.raises(ResourcesError):
        trainer_command(Path("/runs/4"), cores + 1)
    assert run_processes({"resources": {"processes": 3}}) == 3 and run_processes({}) is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("resources", "key", "message"),
    [
        ({"processes": 0}, "resources.processes", "from 1 to 64"),
        ({"processes": "two"}, "resources.processes", "from 1 to 64"),
        ({"nodes": 2}, "resources.nodes", "one machine"),
        ({"strategy": "fsdp"}, "resources.strategy", "accelerate config file"),
        ({"gpus": 1}, "resources.gpus", "unknown key"),
    ],
)
def test_a_bad_resources_section_is_refused_by_field(resources: dict[str, object], key: str, message: str) -> None:
    from tests.training.runs import config
    from training.config import ConfigError, check

    with pytest.raises(ConfigError) as refused:
        check(config(data={"train_file": str(REPO / "demo" / "trajectories.jsonl")}, resources=resources))
    assert message in refused.value.errors.get(key, ""), refused.value.errors


@pytest.mark.django_db
def test_a_run_that_asks_for_more_processes_than_the_worker_has_fails_saying_so(
    researcher: User, fake_trainer: Callable[..., None]
) -> None:
    from core.vocabulary import RunStatus
    from tests.training.runs import config, verified_set
    from training.launcher import execute
    from training.services import create_run

    verified_set()
    run = create_run(config("sft", resources={"processes": 64}), researcher, enqueue=False)
    execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("resources.processes is 64, but this worker has")
