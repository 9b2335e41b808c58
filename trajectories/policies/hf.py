"""A local transformers model as the policy: render the chat template with the tools, sample, parse.

torch and transformers are imported when a policy is built, not when this module is, so Django
processes that only list policy kinds do not pay for them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajectories.policies.base import Message, Policy, PolicyError, PolicyOutput
from trajectories.policies.chat import (
    CLOSE_TAG,
    derive_seed,
    load_tool_template,
    parse_tool_call,
    template_supports_tools,
    to_openai_messages,
)

if TYPE_CHECKING:
    import torch

# Written by scripts/fetch_model.py; its content hash names the checkpoint in provenance.
FETCH_MARKER = ".crucible-fetch.json"
MAX_THREADS = 4  # a 135M model gains nothing past a few cores; more only contends with sandboxes


def checkpoint_id(model_path: str) -> str:
    marker = Path(model_path) / FETCH_MARKER
    try:
        return str(json.loads(marker.read_text())["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return Path(model_path).name or model_path


def _pick_dtype(dtype: str, device: str) -> torch.dtype:
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)  # type: ignore[no-any-return]
    if device.startswith("cuda"):
        return torch.bfloat16
    # Prompt processing is ~4x faster in bfloat16 where the CPU has native bf16 (AVX512-BF16/AMX);
    # elsewhere bf16 is emulated and much slower than float32.
    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return torch.bfloat16
    return torch.float32


class HFPolicy(Policy):
    kind = "hf"

    def __init__(
        self,
        model_path: str,
        temperature: float = 0.8,
        top_p: float = 1.0,
        seed: int | None = None,
        max_new_tokens: int = 256,
        device: str = "cpu",
        dtype: str = "auto",
        num_threads: int | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a typo'd path must not turn into a hub download
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.model_path = str(model_path)
        hub_id = not self.model_path.startswith(("/", ".", "~")) and self.model_path.count("/") <= 1
        if not hub_id and not Path(self.model_path).is_dir():
            # Otherwise transformers reports a missing directory as a malformed hub repo id.
            raise PolicyError(f"no model directory at {self.model_path} (scripts/fetch_model.py makes the bundled one)")
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.max_new_tokens = int(max_new_tokens)
        self.device = device
        if device == "cpu":
            torch.set_num_threads(max(1, num_threads or min(torch.get_num_threads(), MAX_THREADS)))
        self.torch_dtype = _pick_dtype(dtype, device)
        # Any: transformers' stubs type the return of these by union, which every use would re-narrow.
        self.tokenizer: Any
        self.model: Any
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=self.torch_dtype)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot load model {self.model_path!r} (run scripts/fetch_model.py?): {exc}") from exc
        self.model.to(device).eval()
        # Every call passes a full GenerationConfig; the checkpoint's sampling defaults would only be
        # merged into it (and warned about when greedy), so keep just its special tokens.
        saved = self.model.generation_config
        self.model.generation_config = GenerationConfig(
            bos_token_id=saved.bos_token_id, eos_token_id=saved.eos_token_id, pad_token_id=saved.pad_token_id
        )
        if not template_supports_tools(self.tokenizer.chat_template):
            # A checkpoint saved without our template would show the model no tools at all.
            self.tokenizer.chat_template = load_tool_template()
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        eos = {self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|im_end|>")}
        gen_eos = self.model.generation_config.eos_token_id
        eos.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        unk = self.tokenizer.unk_token_id
        self.eos_ids = sorted(i for i in eos if isinstance(i, int) and i >= 0 and i != unk)
        if not self.eos_ids:
            raise PolicyError(f"model {self.model_path!r} has no end-of-turn token; generation would never stop")
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if isinstance(pad, int) else self.eos_ids[0]
        self.checkpoint = checkpoint_id(self.model_path)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model_path,
            "checkpoint": self.checkpoint,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            "dtype": str(self.torch_dtype).removeprefix("torch."),
        }

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        import torch
        from transformers import GenerationConfig

        chat = to_openai_messages(messages)
        started = time.monotonic()
        try:
            enc = self.tokenizer.apply_chat_template(
                chat, tools=tools or None, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as exc:  # jinja raises many types; a prompt we cannot render is our failure
            raise PolicyError(f"cannot render the chat template: {exc}") from exc
        prompt_len = int(enc["input_ids"].shape[1])
        budget = self.max_new_tokens
        if self.context_length:
            budget = min(budget, self.context_length - prompt_len)
        if budget < 1:
            raise PolicyError(f"the conversation is {prompt_len} tokens; the model's context is {self.context_length}")
        sample = self.temperature > 0
        config = GenerationConfig(
            max_new_tokens=budget,
            do_sample=sample,
            temperature=self.temperature if sample else None,
            top_p=self.top_p if sample else None,
            top_k=0 if sample else None,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            # Only the first call is used; stopping at its end saves generating text that is thrown away.
            stop_strings=[CLOSE_TAG],
        )
        seed = derive_seed(self.seed, chat, tools)
        try:
            # fork_rng: seeding must not disturb the RNG of whatever else runs in this process.
            with torch.random.fork_rng(devices=[] if self.device == "cpu" else None), torch.inference_mode():
                torch.manual_seed(seed)
                out = self.model.generate(**enc.to(self.device), generation_config=config, tokenizer=self.tokenizer)
        except (RuntimeError, ValueError) as exc:
            raise PolicyError(f"generation failed: {exc}") from exc
        new_tokens = out[0, prompt_len:]
        raw = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        latency_ms = (time.monotonic() - started) * 1000
        parsed = parse_tool_call(raw)
        if parsed.tool_call is None and len(new_tokens) >= budget and parsed.error:
            parsed.error = f"the reply hit the {budget}-token limit; {parsed.error}"
        return PolicyOutput(
            thought=parsed.thought,
            tool_call=parsed.tool_call,
            raw=raw,
            error=parsed.error,
            latency_ms=latency_ms,
            usage={"prompt_tokens": prompt_len, "completion_tokens": int(len(new_tokens))},
        )

    def close(self) -> None:
        # Drop the references so the weights can be freed; a closed policy is not used again.
        self.model = None
        self.tokenizer = None
