"""The hf policy's number format: bfloat16 only where the CPU has native kernels for it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trajectories.policies import hf
from trajectories.policies.hf import PolicyError, _pick_dtype
from trajectories.policies.registry import PolicySettings, policy_registry


def test_auto_takes_bfloat16_only_with_native_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf, "_native_bf16", lambda: True)
    assert _pick_dtype("auto", "cpu") == torch.bfloat16
    monkeypatch.setattr(hf, "_native_bf16", lambda: False)
    # Emulated bfloat16 is many times slower than float32: never the default then.
    assert _pick_dtype("auto", "cpu") == torch.float32
    assert _pick_dtype("auto", "cuda:0") == torch.bfloat16
    assert _pick_dtype("float32", "cpu") == torch.float32
    with pytest.raises(PolicyError, match="unknown dtype 'float9'"):
        _pick_dtype("float9", "cpu")


def test_the_environment_overrides_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[str] = []

    class Recorder:
        def __init__(self, model: str, **kwargs: object) -> None:  # noqa: ARG002 - the model is not the point
            seen.append(str(kwargs["dtype"]))

    monkeypatch.setattr("trajectories.policies.registry.HFPolicy", Recorder)
    settings = PolicySettings(model="m", temperature=0.0, top_p=1.0, seed=0, max_new_tokens=8, base_dir=tmp_path)
    policy_registry.build("hf", settings)
    monkeypatch.setenv("CRUCIBLE_HF_DTYPE", "float32")
    policy_registry.build("hf", settings)
    assert seen == ["auto", "float32"]
