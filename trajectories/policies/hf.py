"""A local transformers model as the policy: render the chat template with the tools, sample, parse.

torch and transformers are imported when a policy is built, not when this module is, so Django
processes that only list policy kinds do not pay for them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajectories.policies.base import CANCELLED, Message, Policy, PolicyCancelled, PolicyError, PolicyOutput
from trajectories.policies.chat import (
    CLOSE_TAG,
    derive_seed,
    load_tool_template,
    parse_tool_call,
    template_supports_tools,
    to_openai_messages,
)
from trajectories.policies.sampled import sampled_ids

if TYPE_CHECKING:
    import torch

# Idle OpenMP threads sleep instead of spinning. Where cores are shared (two rollouts, their
# sandboxes, the web server), spinning threads take the cores the working ones need: decoding
# measured 5x slower under load without this (bench/model_speed.py). torch's OpenMP reads it
# when torch is first imported, which this module leaves to the policy's first use.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# A peft adapter checkpoint: low-rank weights over a base model that its config names.
ADAPTER_CONFIG = "adapter_config.json"
# Written by scripts/fetch_model.py; its content hash names the checkpoint in provenance.
FETCH_MARKER = ".crucible-fetch.json"
MAX_THREADS = 4  # a 135M model gains nothing past a few cores; more only contends with sandboxes
MODELS_KEPT = 2  # loaded checkpoints one process keeps (a batch's model, an evaluation's checkpoint)
THREADS_ENV = "CRUCIBLE_TORCH_THREADS"
# Set by whoever starts the worker (scripts/run.sh): how many rollouts share this machine's cores.
CONCURRENCY_ENV = "CRUCIBLE_WORKER_CONCURRENCY"


def checkpoint_id(model_path: str) -> str:
    marker = Path(model_path) / FETCH_MARKER
    try:
        return str(json.loads(marker.read_text())["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return Path(model_path).name or model_path


def is_hub_id(model_path: str) -> bool:
    return not model_path.startswith(("/", ".", "~")) and model_path.count("/") <= 1


def model_path_error(model_path: str) -> str | None:
    """Why `model_path` cannot be loaded, judged from the disk only (no torch); None if it looks loadable.

    Hub ids are refused: the policy runs offline, so a name that is no directory is a typo.
    """
    if not model_path.strip():
        return "no model given"
    path = Path(model_path).expanduser()
    if not path.is_dir():
        return f"no model directory at {model_path} (scripts/fetch_model.py makes the bundled one)"
    if (path / ADAPTER_CONFIG).is_file():
        try:
            adapter_base(path)
        except PolicyError as exc:
            return str(exc)
        return None
    if not (path / "config.json").is_file():
        return f"{model_path} has no config.json: not a transformers checkpoint"
    return None


def adapter_base(path: Path) -> Path:
    """The base model an adapter checkpoint (peft's adapter_config.json) was trained on; a PolicyError
    when it is not a model directory on this host, since the adapter alone cannot act."""
    try:
        saved = json.loads((path / ADAPTER_CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise PolicyError(f"cannot read {path / ADAPTER_CONFIG}: {exc}") from None
    base = saved.get("base_model_name_or_path") if isinstance(saved, dict) else None
    if not isinstance(base, str) or not base.strip():
        raise PolicyError(f"the adapter at {path} does not name its base model (base_model_name_or_path)")
    found = Path(base).expanduser()
    if not found.is_absolute():
        found = (path / found).resolve()
    if not (found / "config.json").is_file():
        raise PolicyError(
            f"the adapter at {path} needs its base model at {base}, which is not a model directory here; "
            "put the base there to load the adapter"
        )
    return found


def torch_threads() -> int:
    """Threads for this process's torch: the cores it can use, shared by the rollouts running at once.

    Two workers each running torch with its default (all cores) on two cores oversubscribe the CPU
    and every step slows several times over.
    """
    given = os.environ.get(THREADS_ENV, "").strip()
    if given:
        try:
            return max(1, int(given))
        except ValueError:
            raise PolicyError(f"{THREADS_ENV}={given!r} is not a whole number") from None
    try:
        concurrency = max(1, int(os.environ.get(CONCURRENCY_ENV, "1") or 1))
    except ValueError:
        concurrency = 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_THREADS, cores // concurrency))


class NumberFormat(StrEnum):
    """How the hf policy holds a model's weights and computes with them (CRUCIBLE_HF_DTYPE)."""

    # int4 on a CPU when the weights are already on its grid (the bundled model), else float32 there;
    # bfloat16 on a GPU.
    AUTO = "auto"
    INT4 = "int4"  # 4-bit weights on a CPU (trajectories.policies.quantized), rounding any that are not
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


def number_format(value: str) -> NumberFormat:
    """`value` as a number format; a PolicyError naming the ones there are when it is none."""
    try:
        return NumberFormat(value)
    except ValueError:
        known = ", ".join(NumberFormat)
        raise PolicyError(f"unknown number format {str(value)[:40]!r} for the hf policy (one of {known})") from None


def _read_dtype(fmt: NumberFormat, device: str) -> torch.dtype:
    """The dtype the checkpoint is read in; int4 is built from float32."""
    import torch

    if fmt is NumberFormat.AUTO:
        # On a CPU float32 for weights int4 would move (a trained checkpoint), as they were trained:
        # bfloat16 flips near ties in a memorised call (bench/learning.py evaluates in float32 for
        # that). bfloat16 would be faster there, reading a prompt in half the time though decoding
        # over it slower: the agent's 960-token first step plus 64 tokens ran at 13.1 and 14.1
        # against 10.3 and 13.0 tokens/s in two idle runs (bench/model_speed.py), faster in 9 of 15
        # rounds under load.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if fmt is NumberFormat.INT4:
        if device != "cpu":
            raise PolicyError(f"the int4 number format runs on the CPU only, not {device}")
        return torch.float32
    return getattr(torch, fmt.value)  # type: ignore[no-any-return]


@dataclass
class LoadedModel:
    model: Any  # transformers' stubs type these by union, which every use would re-narrow
    tokenizer: Any
    eos_ids: list[int]
    pad_id: int
    context_length: int
    checkpoint: str
    number_format: str  # what the weights are held in: "auto" resolved


_models: OrderedDict[tuple[str, NumberFormat, str], LoadedModel] = OrderedDict()
_models_pid = os.getpid()
_models_lock = threading.Lock()
_threads_set = False
loads = 0  # models this process has loaded from disk, for tests and the bench


def loaded_model(model_path: str, fmt: NumberFormat, device: str) -> LoadedModel:
    """The model at `model_path`, loaded at most once per process (keyed by path, number format and device).

    Loading is the slow part of a step's first call (seconds), and a worker runs many trajectories
    of the same model. Safe under Celery's prefork pool: a cache filled before a fork is dropped in
    the child (pid check), so each worker process loads lazily, after the fork, its own copy.
    """
    global _models_pid, loads
    where = model_path if is_hub_id(model_path) else str(Path(model_path).expanduser().resolve())
    key = (where, fmt, device)
    with _models_lock:
        if _models_pid != os.getpid():
            _models.clear()
            _models_pid = os.getpid()
        hit = _models.get(key)
        if hit is not None:
            _models.move_to_end(key)
            return hit
        _configure_threads(device)
        loaded = _load(model_path, fmt, device)
        loads += 1
        _models[key] = loaded
        while len(_models) > MODELS_KEPT:
            _models.popitem(last=False)
        return loaded


def _configure_threads(device: str) -> None:
    global _threads_set
    if _threads_set or device != "cpu":
        return
    import torch

    torch.set_num_threads(torch_threads())
    try:
        # Inter-op parallelism only adds threads that fight the intra-op ones over the same cores.
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # torch allows it only before its first parallel work; this process did some already
    _threads_set = True


def _load(model_path: str, fmt: NumberFormat, device: str) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    dtype = _read_dtype(fmt, device)
    adapter = Path(model_path).expanduser()
    base = adapter_base(adapter) if (adapter / ADAPTER_CONFIG).is_file() else None
    try:
        # An adapter checkpoint keeps the tokenizer it was trained with; one saved without falls back to the base's.
        tokenizer_path = model_path if base is None or (adapter / "tokenizer_config.json").is_file() else str(base)
        tokenizer: Any = AutoTokenizer.from_pretrained(tokenizer_path)
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(base or model_path), dtype=dtype, attn_implementation="sdpa"
        )
        if base is not None:
            from peft import PeftModel

            # Merged into the base's weights: generation then costs what the base's does.
            model = PeftModel.from_pretrained(model, model_path).merge_and_unload()
    except (OSError, ValueError) as exc:
        raise PolicyError(f"cannot load model {model_path!r} (run scripts/fetch_model.py?): {exc}") from exc
    model.to(device).eval()
    held = str(dtype).removeprefix("torch.")
    if device == "cpu" and fmt in (NumberFormat.AUTO, NumberFormat.INT4) and _to_int4(model, model_path, fmt):
        held = NumberFormat.INT4.value
    # Every call passes a full GenerationConfig; the checkpoint's sampling defaults would only be
    # merged into it (and warned about when greedy), so keep just its special tokens.
    saved = model.generation_config
    model.generation_config = GenerationConfig(
        bos_token_id=saved.bos_token_id, eos_token_id=saved.eos_token_id, pad_token_id=saved.pad_token_id
    )
    if not template_supports_tools(tokenizer.chat_template):
        # A checkpoint saved without our template would show the model no tools at all.
        tokenizer.chat_template = load_tool_template()
    eos = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    gen_eos = model.generation_config.eos_token_id
    eos.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    unk = tokenizer.unk_token_id
    eos_ids = sorted(i for i in eos if isinstance(i, int) and i >= 0 and i != unk)
    if not eos_ids:
        raise PolicyError(f"model {model_path!r} has no end-of-turn token; generation would never stop")
    pad = tokenizer.pad_token_id
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        eos_ids=eos_ids,
        pad_id=pad if isinstance(pad, int) else eos_ids[0],
        context_length=int(getattr(model.config, "max_position_embeddings", 0) or 0),
        checkpoint=checkpoint_id(model_path),
        number_format=held,
    )


def _to_int4(model: Any, model_path: str, fmt: NumberFormat) -> bool:
    from trajectories.policies import quantized

    try:
        return quantized.to_int4(model, only_if_on_grid=fmt is NumberFormat.AUTO)
    except quantized.Int4Unsupported as exc:
        if fmt is NumberFormat.AUTO:
            return False
        raise PolicyError(f"model {model_path!r} cannot run in int4: {exc}") from exc


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
        stop_event: threading.Event | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a typo'd path must not turn into a hub download
        self.model_path = str(model_path)
        if not is_hub_id(self.model_path) and not Path(self.model_path).expanduser().is_dir():
            # Otherwise transformers reports a missing directory as a malformed hub repo id.
            raise PolicyError(f"no model directory at {self.model_path} (scripts/fetch_model.py makes the bundled one)")
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.max_new_tokens = int(max_new_tokens)
        self.device = device
        fmt = number_format(dtype)
        # The runner sets this when the batch is cancelled; generation stops at the next token.
        self.stop_event = stop_event
        self.loaded: LoadedModel | None = loaded_model(self.model_path, fmt, device)
        self.checkpoint = self.loaded.checkpoint
        self.number_format = self.loaded.number_format

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model_path,
            "checkpoint": self.checkpoint,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.number_format,
        }

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList

        if self.loaded is None:
            raise PolicyError("the policy was closed")
        loaded = self.loaded
        self._check_stop()
        chat = to_openai_messages(messages)
        started = time.monotonic()
        try:
            enc = loaded.tokenizer.apply_chat_template(
                chat, tools=tools or None, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as exc:  # jinja raises many types; a prompt we cannot render is our failure
            raise PolicyError(f"cannot render the chat template: {exc}") from exc
        prompt_len = int(enc["input_ids"].shape[1])
        budget = self.max_new_tokens
        if loaded.context_length:
            budget = min(budget, loaded.context_length - prompt_len)
        if budget < 1:
            raise PolicyError(
                f"the conversation is {prompt_len} tokens; the model's context is {loaded.context_length}"
            )
        sample = self.temperature > 0
        config = GenerationConfig(
            max_new_tokens=budget,
            do_sample=sample,
            temperature=self.temperature if sample else None,
            top_p=self.top_p if sample else None,
            top_k=0 if sample else None,
            eos_token_id=loaded.eos_ids,
            pad_token_id=loaded.pad_id,
            # Only the first call is used; stopping at its end saves generating text that is thrown away.
            stop_strings=[CLOSE_TAG],
        )
        seed = derive_seed(self.seed, chat, tools)
        stopping = StoppingCriteriaList([StopOnEvent(self.stop_event)]) if self.stop_event is not None else None
        generate_started = time.monotonic()
        try:
            # fork_rng: seeding must not disturb the RNG of whatever else runs in this process.
            with torch.random.fork_rng(devices=[] if self.device == "cpu" else None), torch.inference_mode():
                torch.manual_seed(seed)
                out = loaded.model.generate(
                    **enc.to(self.device),
                    generation_config=config,
                    tokenizer=loaded.tokenizer,
                    stopping_criteria=stopping,
                )
        except (RuntimeError, ValueError) as exc:
            raise PolicyError(f"generation failed: {exc}") from exc
        generate_ms = (time.monotonic() - generate_started) * 1000
        # A generation cut short by a cancel is no reply: the step is not recorded.
        self._check_stop()
        new_tokens = out[0, prompt_len:]
        raw = loaded.tokenizer.decode(new_tokens, skip_special_tokens=True)
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
            generate_ms=generate_ms,
            sampled=sampled_ids(enc["input_ids"][0].tolist(), new_tokens.tolist()),
        )

    def _check_stop(self) -> None:
        if self.stop_event is not None and self.stop_event.is_set():
            raise PolicyCancelled(CANCELLED)

    def close(self) -> None:
        # The weights stay in the process cache for the next trajectory; this policy is done with them.
        self.loaded = None


class StopOnEvent:
    """A transformers stopping criterion: stop every sequence once `event` is set (a cancel).

    Checked after each generated token, so a cancel stops a long generation within one token's time.
    """

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        import torch

        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)
