"""The trainer's command line and environment: `accelerate launch`, in one process or several."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from rewards.services import probe_secret
from trajectories.model_server import free_port

PROCESSES_ENV = "CRUCIBLE_TRAINER_PROCESSES"
MAX_PROCESSES = 64


def trainer_environment() -> dict[str, str]:
    """The trainer's environment: ours, plus the reward service's probe key, so that the rewards a
    GRPO run scores in-process are the verdicts the reward service would give (the same probes, the
    same changed values), not a second scorer keyed by chance."""
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CRUCIBLE_PROBE_SECRET": probe_secret().hex(),
        **({} if has_gpu() else {"ACCELERATE_USE_CPU": "true"}),
    }


class ResourcesError(ValueError):
    """A run asks for more than the worker that took it has."""


def trainer_processes(asked: int | None = None) -> int:
    """How many processes train one run together (data parallel): the run's `resources.processes`,
    else the worker's CRUCIBLE_TRAINER_PROCESSES, else 1. A run may not ask for more processes than
    the worker has GPUs (on a GPU host) or CPU cores."""
    if asked is not None:
        available, what = (gpu_count(), "GPUs") if has_gpu() else (os.cpu_count() or 1, "CPU cores")
        if asked > available:
            raise ResourcesError(
                f"resources.processes is {asked}, but this worker has {available} {what}: "
                f"ask for at most {available}, or run it on a larger worker"
            )
        return asked
    given = os.environ.get(PROCESSES_ENV, "1").strip() or "1"
    try:
        processes = int(given)
    except ValueError:
        raise ImproperlyConfigured(f"{PROCESSES_ENV}={given[:40]!r} is not a whole number") from None
    if not 1 <= processes <= MAX_PROCESSES:
        raise ImproperlyConfigured(f"{PROCESSES_ENV}={processes} is not between 1 and {MAX_PROCESSES}")
    return processes


def run_processes(config: dict[str, object]) -> int | None:
    """The processes a run's config asks for (resources.processes, checked by training.config), or None."""
    resources = config.get("resources")
    processes = resources.get("processes") if isinstance(resources, dict) else None
    return processes if isinstance(processes, int) and not isinstance(processes, bool) else None


def trainer_command(directory: Path, processes: int | None = None) -> list[str]:
    """`accelerate launch ... -m training.trainers <run_dir>`. Several machines, DeepSpeed or FSDP are
    an accelerate config file (CRUCIBLE_ACCELERATE_CONFIG), not code. Without one: one process, or
    `processes` (the run's resources.processes, else CRUCIBLE_TRAINER_PROCESSES) of them in data
    parallel (DDP: NCCL on GPUs, gloo on a CPU)."""
    module = os.environ.get("CRUCIBLE_TRAINER_MODULE", "training.trainers")
    count = trainer_processes(processes)  # refused here, whatever launches it, when the worker lacks them
    if os.environ.get("CRUCIBLE_TRAINING_LAUNCHER", "accelerate") == "python":
        return [sys.executable, "-u", "-m", module, str(directory)]
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    config_file = os.environ.get("CRUCIBLE_ACCELERATE_CONFIG", "")
    if config_file:
        command += ["--config_file", config_file]
    else:
        command += ["--num_processes", str(count), "--num_machines", "1", "--mixed_precision", "no"]
        command += ["--dynamo_backend", "no"]
        if count > 1:
            # accelerate's --cpu starts one process whatever --num_processes says; its multi-process
            # launcher (torch.distributed.run) with ACCELERATE_USE_CPU (trainer_environment) is DDP over gloo.
            command += ["--multi_gpu", "--main_process_port", str(free_port())]
        elif not has_gpu():
            command.append("--cpu")
    return [*command, "-m", module, str(directory)]


def gpu_count() -> int:
    """GPUs the trainer would see: CUDA_VISIBLE_DEVICES where it is set, else nvidia-smi's list."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


def has_gpu() -> bool:
    """Whether the trainer would find a GPU, asked without importing torch (the launcher runs in a web worker)."""
    return shutil.which("nvidia-smi") is not None and os.environ.get("CUDA_VISIBLE_DEVICES") != ""
