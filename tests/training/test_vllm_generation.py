"""GRPO's generations through vLLM (TRL's colocate and server modes): checked where the run is
submitted and again by the trainer, refused clearly where vLLM cannot run, and run for real where
vLLM and a CUDA GPU are present."""

from __future__ import annotations

import importlib.util
import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from tests.training.runs import MODEL
from tests.training.trainer_support import BUNDLED, grpo_rows, parse_events, run_config, write_jsonl
from training.config import ConfigError, check
from training.schema import GENERATION_PLACES, check_generation
from training.trainers import grpo
from training.trainers.__main__ import main
from training.trainers.common import TrainerError, read_config


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


VLLM_HERE = importlib.util.find_spec("vllm") is not None and _cuda()


def _errors(raw: dict[str, Any]) -> dict[str, str]:
    try:
        check(raw)
    except ConfigError as exc:
        return exc.errors
    return {}


@pytest.mark.django_db
def test_the_submitted_config_names_where_generation_happens_and_is_refused_field_by_field(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    base = {"kind": "grpo", "model": {"base_model": MODEL}, "data": {"train_file": str(data)}}
    assert "environment.generation" not in _errors({**base, "environment": {"generation": "vllm_colocate"}})
    good_server = {"generation": "vllm_server", "vllm_server_url": "http://10.0.0.2:8000"}
    assert (
        not {"environment.generation", "environment.vllm_server_url"}
        & _errors({**base, "environment": good_server}).keys()
    )
    errors = _errors({**base, "environment": {"generation": "sglang"}})
    assert errors["environment.generation"] == f"must be one of {', '.join(GENERATION_PLACES)}"
    errors = _errors({**base, "environment": {"generation": "vllm_server"}})
    assert "must be the http(s) URL of a `trl vllm-serve` server" in errors["environment.vllm_server_url"]
    errors = _errors({**base, "environment": {"generation": "vllm_server", "vllm_server_url": "file:///etc/passwd"}})
    assert "environment.vllm_server_url" in errors
    errors = _errors({**base, "environment": {"vllm_server_url": "http://10.0.0.2:8000"}})
    assert errors["environment.vllm_server_url"] == "applies to environment.generation: vllm_server only"
    fleet = {"mode": "agent", "episodes": "fleet", "generation": "vllm_colocate"}
    assert "sampled by the trainer's policy server" in _errors({**base, "environment": fleet})["environment.generation"]
    sft = _errors({**base, "kind": "sft", "environment": {"generation": "vllm_colocate"}})
    assert sft["environment.generation"] == "applies to grpo runs only, not sft"


def test_check_generation_fills_in_the_trainer_by_default() -> None:
    environment: dict[str, Any] = {}
    assert check_generation(environment) == {} and environment["generation"] == "trainer"


@pytest.mark.skipif(VLLM_HERE, reason="vLLM and a CUDA GPU are here: the refusal does not apply")
def test_the_trainer_refuses_vllm_generation_where_vllm_cannot_run(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(
        tmp_path / "run", "grpo", BUNDLED, data, {"num_generations": 2}, environment={"generation": "vllm_colocate"}
    )
    with pytest.raises(TrainerError, match=r"generation vllm_colocate needs the vllm package and a CUDA GPU"):
        read_config(tmp_path / "run")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(tmp_path / "run")]) == 2  # a clear failure, before any model is loaded
    (done,) = [e for e in parse_events(out.getvalue()) if e["event"] == "done"]
    assert done["status"] == "failed" and "use environment.generation: trainer" in done["error"]


def test_each_place_maps_to_trls_own_vllm_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("training.trainers.common.vllm_available", lambda: True)  # the mapping, not the host
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    places = {
        "trainer": {},
        "vllm_colocate": {"generation": "vllm_colocate"},
        "vllm_server": {"generation": "vllm_server", "vllm_server_url": "http://10.0.0.2:8000"},
    }
    got = {}
    for place, environment in places.items():
        run_config(tmp_path / place, "grpo", BUNDLED, data, {"num_generations": 2}, environment=environment)
        got[place] = grpo.generation_arguments(read_config(tmp_path / place))
    assert got["trainer"] == {}
    assert got["vllm_colocate"]["use_vllm"] and got["vllm_colocate"]["vllm_mode"] == "colocate"
    assert got["vllm_server"] == {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": "http://10.0.0.2:8000",
        "vllm_importance_sampling_correction": True,
    }
    from trl import GRPOConfig

    for place in places:  # TRL takes them as they are (its own checks of the fields included)
        GRPOConfig(output_dir=str(tmp_path / "o"), use_cpu=True, **got[place])


@pytest.mark.skipif(not VLLM_HERE, reason="needs vLLM and a CUDA GPU; these CPU machines have neither")
def test_a_grpo_run_generates_through_vllm_colocated_on_the_gpu(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(
        tmp_path / "run",
        "grpo",
        BUNDLED,
        data,
        {"num_generations": 2, "max_new_tokens": 64, "max_steps": 2},
        environment={"mode": "single_turn", "generation": "vllm_colocate"},
    )
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(tmp_path / "run")]) == 0
    events = parse_events(out.getvalue())
    rollouts = [e for e in events if e["event"] == "rollout"]
    assert len(rollouts) == 4 and all(r["completion"] for r in rollouts)
    assert [e["step"] for e in events if e["event"] == "metric"][-1] == 2
