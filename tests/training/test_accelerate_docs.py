"""The accelerate configs docs/training.md gives for one or more GPUs load with accelerate's own
loader, and the launcher passes such a file to `accelerate launch` as its parser expects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import launch_command_parser
from django.conf import settings

from training.launcher import trainer_command

DOC = Path(settings.BASE_DIR) / "docs" / "training.md"
BLOCK = re.compile(r"```yaml accelerate\n(.*?)```", re.S)


def test_every_documented_accelerate_config_loads_and_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 3  # one GPU, several GPUs, several machines
    processes = []
    for n, block in enumerate(blocks):
        path = tmp_path / f"accelerate-{n}.yaml"
        path.write_text(block)
        config = load_config_from_file(str(path))
        assert isinstance(config, ClusterConfig) and config.use_cpu is False
        processes.append((config.num_machines, config.num_processes, str(config.distributed_type)))
        monkeypatch.setenv("CRUCIBLE_ACCELERATE_CONFIG", str(path))
        monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
        command = trainer_command(Path("/runs/1"))
        args = launch_command_parser().parse_args(command[3:])
        assert args.config_file == str(path) and args.module and args.training_script == "training.trainers"
        assert args.training_script_args == ["/runs/1"]
    assert processes[0][:2] == (1, 1)
    assert any(m == 1 and p > 1 and "MULTI_GPU" in d for m, p, d in processes)
    assert any(m > 1 for m, _, _ in processes)
