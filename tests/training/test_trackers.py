"""A run's metrics reach an experiment tracker too: TensorBoard event files by default.

The event files are read back record by record (TFRecord framing, tensorboardX's Event proto),
as TensorBoard reads them.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import pytest

from tests.training.trainer_support import make_tiny_model, run_config, short_sft_rows, train_in_process, write_jsonl
from training.config import ConfigError, check
from training.schema import check_report_to
from training.trainers.common import TrainerError, read_config


def scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] over every event file under `directory`."""
    from tensorboardX.proto import event_pb2

    found: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(directory.rglob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_a_run_writes_tensorboard_event_files_in_its_output_by_default(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "sft.jsonl", short_sft_rows())
    run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 3, "batch_size": 1})
    code, events = train_in_process(tmp_path / "run")
    assert code == 0
    logged = scalars(tmp_path / "run" / "out" / "tensorboard")
    losses = [event["values"]["loss"] for event in events if event["event"] == "metric"]
    assert [step for step, _ in logged["train/loss"]] == [1, 2, 3]
    assert [value for _, value in logged["train/loss"]] == pytest.approx(losses, rel=1e-6)


def test_report_to_none_writes_no_tracker_files(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "sft.jsonl", short_sft_rows())
    run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 1, "batch_size": 1}, logging={"report_to": "none"})
    code, _ = train_in_process(tmp_path / "run")
    assert code == 0 and not (tmp_path / "run" / "out" / "tensorboard").exists()


@pytest.mark.django_db
def test_report_to_is_checked_where_the_run_is_made_and_where_it_trains(tiny: Path, tmp_path: Path) -> None:
    assert check_report_to(None) == (["tensorboard"], None)
    assert check_report_to(["mlflow", "tensorboard", "mlflow"]) == (["tensorboard", "mlflow"], None)
    for bad in ("comet", ["tensorboard", 3], {"tensorboard": True}):
        assert check_report_to(bad)[1] is not None
    data = write_jsonl(tmp_path / "sft.jsonl", short_sft_rows())
    raw = {
        "kind": "sft",
        "model": {"base_model": str(tiny)},
        "data": {"train_file": str(data)},
        "logging": {"report_to": "comet"},
    }
    with pytest.raises(ConfigError) as refused:
        check(raw)
    assert "tensorboard, wandb, mlflow" in refused.value.errors["logging.report_to"]
    # A tracker the trainer's host lacks is refused there, by name, before any training.
    missing = next(name for name in ("wandb", "mlflow") if importlib.util.find_spec(name) is None)
    config = run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 1}, logging={"report_to": [missing]})
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    with pytest.raises(TrainerError, match=f"{missing} is not installed on this host"):
        read_config(tmp_path / "run")
