"""The hf policy's number format: int4 for the bundled model on a CPU, float32 for weights int4 would
move, a bad value refused with the ones there are."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tests.training.trainer_support import make_tiny_model
from trajectories.batches import check_policy_source
from trajectories.policies import hf, quantized
from trajectories.policies.hf import HFPolicy, NumberFormat, PolicyError, number_format
from trajectories.policies.registry import PolicySettings, policy_registry
from trajectories.rollout_settings import RolloutError, RolloutSettings


def on_q4_grid(out_features: int, in_features: int) -> torch.Tensor:
    """Weights as a Q4_1 file holds them: per block of 32, a level 0..15 times a scale plus the minimum."""
    torch.manual_seed(0)
    blocks = (out_features, in_features // 32)
    levels = torch.randint(0, 16, (*blocks, 32)).float()
    levels[..., 0], levels[..., 1] = 0, 15  # each block spans its minimum to its maximum
    scale, low = torch.rand(*blocks, 1) * 0.01, torch.randn(*blocks, 1) * 0.05
    return (levels * scale + low).reshape(out_features, in_features)


def on_q8_grid(out_features: int, in_features: int) -> torch.Tensor:
    torch.manual_seed(1)
    blocks = (out_features, in_features // 32)
    levels = torch.randint(-127, 128, (*blocks, 32)).float()
    levels[..., 0] = 127
    return (levels * torch.rand(*blocks, 1) * 0.001).reshape(out_features, in_features)


def linear(weight: torch.Tensor) -> nn.Linear:
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight.data = weight
    return layer


@pytest.mark.parametrize("rows", [1, 5, 40])  # decoding one token, a few, a prompt (the bfloat16 copy)
def test_int4_layers_compute_what_their_float_weights_do(rows: int) -> None:
    weight = on_q4_grid(96, 128)
    grid = quantized.q4_grid(weight)
    assert grid.off_grid < 1e-4
    layer = quantized.Int4Linear(linear(weight), grid)
    x = torch.randn(2, rows, 128)
    expected = x @ weight.T
    # bfloat16 inputs and outputs: within a few of its steps (2^-8) of the largest value.
    assert torch.allclose(layer(x), expected, atol=0.02 * float(expected.abs().max()))

    head_weight = on_q8_grid(64, 128)
    head = quantized.Int8Head(linear(head_weight), quantized.q8_grid(head_weight))
    expected = x @ head_weight.T
    assert torch.allclose(head(x), expected, atol=0.02 * float(expected.abs().max()))


def test_without_native_bfloat16_a_prompt_runs_on_the_checkpoints_own_float32_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    weight = on_q4_grid(96, 128)
    # Emulated bfloat16 (an AVX2 CPU): the prompt's product is float32's, over the weight itself, not a copy.
    monkeypatch.setattr(quantized, "native_bfloat16", lambda: False)
    model = nn.Sequential(linear(weight))
    model.get_output_embeddings = lambda: None  # type: ignore[assignment, method-assign]
    assert quantized.to_int4(model, only_if_on_grid=True)
    layer = model[0]
    assert isinstance(layer, quantized.Int4Linear)
    assert layer.dense.dtype == torch.float32 and layer.dense.data_ptr() == weight.data_ptr()
    prompt = torch.randn(1, 40, 128)
    assert torch.allclose(layer(prompt), prompt @ weight.T, atol=1e-5)
    # Native bfloat16: the prompt's copy is bfloat16, as fast as the kernel's input.
    monkeypatch.setattr(quantized, "native_bfloat16", lambda: True)
    model = nn.Sequential(linear(weight))
    model.get_output_embeddings = lambda: None  # type: ignore[assignment, method-assign]
    assert quantized.to_int4(model, only_if_on_grid=True)
    assert model[0].dense.dtype == torch.bfloat16


def test_weights_off_the_grid_are_left_as_they_are_unless_int4_is_asked_for(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    tiny = make_tiny_model(tmp_path / "tiny")  # random weights, as training leaves them: between levels
    model = AutoModelForCausalLM.from_pretrained(tiny)
    before = {name: p.clone() for name, p in model.named_parameters()}
    assert quantized.to_int4(model, only_if_on_grid=True) is False
    assert not any(isinstance(m, quantized.Int4Linear | quantized.Int8Head) for m in model.modules())
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert quantized.to_int4(model, only_if_on_grid=False) is True
    assert isinstance(model.get_output_embeddings(), quantized.Int8Head)

    assert HFPolicy(str(tiny)).describe()["dtype"] == "float32"
    assert HFPolicy(str(tiny), dtype="int4").describe()["dtype"] == "int4"


def test_an_int4_decoding_step_runs_on_one_thread_and_gives_the_threads_back(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(make_tiny_model(tmp_path / "tiny")).eval()
    assert quantized.to_int4(model, only_if_on_grid=False)
    seen: list[int] = []
    model.model.layers[0].register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():
            model(input_ids=torch.ones(1, 1, dtype=torch.long))  # a decoding step
            model(input_ids=torch.ones(1, 40, dtype=torch.long))  # a prompt
            with pytest.raises(IndexError):
                model(input_ids=torch.full((1, 1), 10**6, dtype=torch.long))  # no such token
        assert seen == [1, 2]
        assert torch.get_num_threads() == 2  # also after the failed step
    finally:
        torch.set_num_threads(threads)


def test_a_layer_the_kernel_cannot_take_keeps_the_model_in_float32(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(make_tiny_model(tmp_path / "tiny"))
    model.model.layers[1].mlp.down_proj = nn.Linear(128, 8)  # 8 outputs: the kernel packs 16 at a time
    with pytest.raises(quantized.Int4Unsupported, match="down_proj is 8×128"):
        quantized.to_int4(model, only_if_on_grid=False)
    assert not any(isinstance(m, quantized.Int4Linear) for m in model.modules())  # none swapped before it
    assert hf._to_int4(model, "tiny", NumberFormat.AUTO) is False
    with pytest.raises(PolicyError, match="'tiny' cannot run in int4"):
        hf._to_int4(model, "tiny", NumberFormat.INT4)


def test_the_bundled_model_runs_in_int4_and_mostly_picks_float32s_tokens(model_dir: str) -> None:
    from transformers import AutoModelForCausalLM

    policy = HFPolicy(model_dir, temperature=0.0)
    assert policy.describe()["dtype"] == "int4"
    int4 = policy.loaded
    assert int4 is not None
    assert isinstance(int4.model.get_output_embeddings(), quantized.Int8Head)
    float32 = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    chat = [{"role": "user", "content": "Write a Python function that reverses a string."}]
    ids = int4.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    start = ids["input_ids"].shape[1]
    with torch.inference_mode():
        reply = float32.generate(**ids, max_new_tokens=24, do_sample=False)[0]
        # Given float32's reply so far, int4's next token (decoded a token at a time, as generate
        # does) is float32's at nearly every position: the weights are the same numbers, and
        # bfloat16 arithmetic may flip a near tie.
        out = int4.model(input_ids=reply[None, :start], use_cache=True)
        forced = [out.logits[0, -1].argmax()]
        for token in reply[start:-1]:
            out = int4.model(input_ids=token.view(1, 1), cache=out.cache, use_cache=True)
            forced.append(out.logits[0, -1].argmax())
    agreement = float((torch.stack(forced) == reply[start:]).float().mean())
    assert agreement >= 0.9
    # The trainers' copy is the checkpoint's own float32 layers.
    assert all(type(m) is not quantized.Int4Linear for m in float32.modules())


def test_auto_is_bfloat16_on_a_gpu_and_int4_needs_the_cpu() -> None:
    assert hf._read_dtype(NumberFormat.AUTO, "cuda:0") == torch.bfloat16
    assert hf._read_dtype(NumberFormat.AUTO, "cpu") == torch.float32  # then int4 where the grid allows
    assert hf._read_dtype(NumberFormat.BFLOAT16, "cpu") == torch.bfloat16
    with pytest.raises(PolicyError, match="CPU only"):
        hf._read_dtype(NumberFormat.INT4, "cuda:0")


def test_a_bad_number_format_is_refused_with_the_ones_there_are(
    model_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PolicyError, match=r"unknown number format 'int8' .*one of auto, int4, float32"):
        number_format("int8")
    with pytest.raises(PolicyError, match="unknown number format 'float64'"):
        HFPolicy(model_dir, dtype="float64")  # a torch dtype, but not one the policy offers
    monkeypatch.setenv("CRUCIBLE_HF_DTYPE", "in4")
    # Before anything is queued, as the launch form and the rollout command ask.
    with pytest.raises(RolloutError, match="CRUCIBLE_HF_DTYPE='in4' is not one of auto, int4"):
        check_policy_source(RolloutSettings("hf", model_dir))


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
