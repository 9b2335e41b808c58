"""What every trainer shares: the run directory's config, events on stdout, loading, checkpoints.

Plain Python, no Django and no database: this runs under `accelerate launch` on a GPU host.
The launcher reads stdout line by line; a line that parses as a JSON object with an "event"
is a record (metric, checkpoint, rollout, done), anything else is log.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from core.hardware import native_bfloat16
from core.vocabulary import TrainingKind, values
from training.schema import (
    ALL_LINEAR,
    EPISODE_PLACES,
    GRPO_MODES,
    LOAD_IN_4BIT_NEEDS,
    RL,
    TARGET_MODULES,
    VLLM_NEEDS,
    check_generation,
    check_model,
    check_rl,
    targets_error,
    whole,
)
from training.trainers import resume
from training.trainers.trackers import TrackerError, installed_trackers

if TYPE_CHECKING:
    pass

KINDS = values(TrainingKind)
# A JSONL row bigger than this is a broken export, not a conversation (the limit bounds memory).
MAX_ROW_BYTES = 16 * 1024 * 1024
MAX_ROWS = 1_000_000
# Saved configs must not claim a quantisation the weights no longer have (the config's model.load_in_4bit).
DROPPED_CONFIG_KEYS = ("quantization_config",)
_emit_lock = threading.Lock()


class TrainerError(RuntimeError):
    """A run that cannot go on: bad config, unreadable data, a model that does not load."""


def emit(record: dict[str, Any], stream: TextIO | None = None, every_rank: bool = False) -> None:
    """One event as one line; the launcher parses it. Reward functions may run on threads.

    Under several processes only the main one reports metrics and checkpoints (it alone saves);
    rollouts happen on every process, so each reports its own (`every_rank`).
    """
    if not every_rank and os.environ.get("RANK", "0") != "0":
        return
    line = json.dumps(record, default=str, allow_nan=False)
    with _emit_lock:
        out = stream or sys.stdout
        out.write(line + "\n")
        out.flush()


def log(message: str) -> None:
    """A log line: on stderr so it can never be mistaken for an event."""
    print(message, file=sys.stderr, flush=True)


@dataclass
class TrainerConfig:
    """The run's config as the trainer uses it; the rl numbers are training.schema's."""

    kind: str
    base_model: Path
    train_file: Path
    output_dir: Path
    max_steps: int = int(RL["max_steps"].default)  # type: ignore[arg-type]
    batch_size: int = int(RL["batch_size"].default)  # type: ignore[arg-type]
    gradient_accumulation_steps: int = int(RL["gradient_accumulation_steps"].default)  # type: ignore[arg-type]
    learning_rate: float = float(RL["learning_rate"].default)  # type: ignore[arg-type]
    kl_coef: float = float(RL["kl_coef"].default)  # type: ignore[arg-type]
    max_length: int | None = None  # None: the longest row, at most the model's context (fit_max_length)
    max_new_tokens: int = int(RL["max_new_tokens"].default)  # type: ignore[arg-type]
    num_generations: int = int(RL["num_generations"].default)  # type: ignore[arg-type]
    temperature: float = float(RL["temperature"].default)  # type: ignore[arg-type]
    epsilon: float = float(RL["epsilon"].default)  # type: ignore[arg-type]
    loss_type: str = str(RL["loss_type"].default)
    mask_truncated_completions: bool = bool(RL["mask_truncated_completions"].default)
    max_prompt_length: int | None = None  # None: no limit
    max_staleness: int = int(RL["max_staleness"].default)  # type: ignore[arg-type]
    reward_clip: float | None = None  # None: rewards as scored
    off_policy_mask: float | None = None  # None: training.schema's derived default (grpo.off_policy_threshold)
    seed: int = int(RL["seed"].default)  # type: ignore[arg-type]
    save_every_steps: int = 0  # 0: only the final checkpoint
    report_to: list[str] = field(default_factory=list)  # experiment trackers (training.schema.TRACKERS)
    mode: str = "single_turn"
    load_in_4bit: bool = False  # the base's weights in 4 bits (bitsandbytes, CUDA), only under lora
    lora: dict[str, Any] | None = None  # model.lora as checked: adapters train, the base's weights stay
    environment: dict[str, Any] = field(default_factory=dict)
    # A resumed run (training.trainers.resume): its steps, its checkpoints' root and what it resumes from.
    step_offset: int = 0  # added to the Trainer's step: events carry the run's step
    run_output: Path | None = None  # where every checkpoint of the run lies (output_dir, or its parent)
    resume_state: Path | None = None  # the checkpoint whose optimizer, schedule, RNG and data position go on
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def episodes(self) -> str:
        """Where a GRPO agent run's episodes run: "trainer" or "fleet" (training.schema.EPISODE_PLACES)."""
        return str(self.environment.get("episodes", "trainer"))

    @property
    def generation(self) -> str:
        """Where GRPO samples its generations (training.schema.GENERATION_PLACES)."""
        return str(self.environment.get("generation", "trainer"))

    @property
    def sandbox_backend(self) -> str:
        value = self.environment.get("sandbox_type") or self.environment.get("backend") or ""
        return str(value)


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name) or {}
    if not isinstance(value, dict):
        raise TrainerError(f"config.{name} must be a mapping")
    return value


def _path(value: Any, where: str, *, directory: bool) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise TrainerError(f"config.{where} is missing")
    path = Path(value).expanduser()
    if directory and not (path / "config.json").is_file():
        raise TrainerError(f"config.{where}: {value!r} is not a model directory with a config.json")
    if not directory and not path.is_file():
        raise TrainerError(f"config.{where}: no such file {value!r}")
    return path.resolve()


def read_config(run_dir: Path) -> TrainerConfig:
    """The run directory's config.json, checked again here: the file may come from anywhere."""
    source = run_dir / "config.json"
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrainerError(f"cannot read {source}: {exc}") from None
    if not isinstance(raw, dict):
        raise TrainerError(f"{source} must hold a JSON object")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise TrainerError(f"config.kind must be one of {', '.join(KINDS)}, not {kind!r}")
    model, rl, data = _section(raw, "model"), _section(raw, "rl"), _section(raw, "data")
    logging_, environment = _section(raw, "logging"), _section(raw, "environment")
    mode = environment.get("mode", "single_turn")
    if mode not in GRPO_MODES:
        raise TrainerError(f"config.environment.mode must be one of {', '.join(GRPO_MODES)}, not {mode!r}")
    episodes = environment.get("episodes", "trainer")
    if episodes not in EPISODE_PLACES or (episodes == "fleet" and mode != "agent"):
        raise TrainerError(
            f"config.environment.episodes must be one of {', '.join(EPISODE_PLACES)} (fleet: agent mode only), "
            f"not {episodes!r}"
        )
    if kind != TrainingKind.GRPO.value and ("generation" in environment or "vllm_server_url" in environment):
        raise TrainerError(f"config.environment.generation applies to grpo runs only, not {kind}")
    for key, message in check_generation(environment).items():
        raise TrainerError(f"config.{key} {message}, not {_given(raw, key)!r}")
    if environment["generation"] != "trainer" and not vllm_available():
        raise TrainerError(f"config.environment.generation {environment['generation']} {VLLM_NEEDS}")
    model, model_errors = check_model(model)
    for key, message in model_errors.items():
        raise TrainerError(f"config.{key} {message}, not {_given(raw, key)!r}")
    if model.get("load_in_4bit") and not four_bit_available():
        raise TrainerError(f"config.model.load_in_4bit {LOAD_IN_4BIT_NEEDS}")
    rl, errors = check_rl(rl, TrainingKind(kind))
    if errors:
        key, message = next(iter(errors.items()))
        raise TrainerError(f"config.{key} {message}, not {rl.get(key.removeprefix('rl.'))!r}")
    given = logging_.get("save_every_steps", 0)
    save_every = whole(given)
    if save_every is None or save_every < 0:
        raise TrainerError(f"config.logging.save_every_steps must be a whole number >= 0, not {given!r}")
    try:
        trackers = installed_trackers(logging_.get("report_to"))
    except TrackerError as exc:
        raise TrainerError(str(exc)) from None
    output = Path(str(raw.get("output_dir") or run_dir / "output")).expanduser().resolve()
    base_model = _path(model.get("base_model"), "model.base_model", directory=True)
    rl_values = {key: rl[key] for key in RL if key in rl}
    max_steps = int(rl_values.get("max_steps", TrainerConfig.max_steps))
    try:
        plan = resume.plan(raw.get("resume"), base_model, output, max_steps)
    except resume.ResumeError as exc:
        raise TrainerError(str(exc)) from None
    if plan.at_step:
        log(resume.describe(plan, base_model))
    rl_values["max_steps"] = plan.max_steps
    return TrainerConfig(
        kind=kind,
        base_model=base_model,
        train_file=_path(data.get("train_file"), "data.train_file", directory=False),
        output_dir=plan.output_dir,
        **rl_values,
        save_every_steps=save_every,
        report_to=trackers,
        mode=str(mode),
        load_in_4bit=bool(model.get("load_in_4bit")),
        lora=model.get("lora"),
        environment=environment,
        step_offset=plan.step_offset,
        run_output=output,
        resume_state=plan.state,
        raw=raw,
    )


def _given(raw: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted key of the config as written (None where it is absent)."""
    value: Any = raw
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def four_bit_available() -> bool:
    import importlib.util

    import torch

    return torch.cuda.is_available() and importlib.util.find_spec("bitsandbytes") is not None


def vllm_available() -> bool:
    """vLLM can sample here: the package is installed and there is a CUDA GPU for it."""
    import importlib.util

    import torch

    return torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


def quantized(config: TrainerConfig) -> dict[str, Any]:
    """from_pretrained's arguments for model.load_in_4bit (QLoRA: NF4 weights, computing in the run's
    dtype, bfloat16 by default); none without it."""
    if not config.load_in_4bit:
        return {}
    import torch
    from transformers import BitsAndBytesConfig

    compute = torch_dtype(config) if config.raw.get("model", {}).get("torch_dtype") else torch.bfloat16
    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute,
        ),
        # 4-bit weights cannot be moved after loading: each process loads its copy onto its own GPU.
        "device_map": {"": int(os.environ.get("LOCAL_RANK", "0"))},
    }


def peft_config(config: TrainerConfig, model: Any, task_type: str) -> Any:
    """peft's LoraConfig for the run's model.lora (None without it: every weight trains).

    The names in target_modules are checked against the loaded model here, because the config may
    name the base's modules wrongly and peft would only say so deep in the trainer's set-up."""
    if config.lora is None:
        return None
    from peft import LoraConfig

    targets = config.lora[TARGET_MODULES]
    problem = targets_error(targets, {name for name, _ in model.named_modules()})
    if problem:
        raise TrainerError(f"config.model.lora.{TARGET_MODULES}: {problem}")
    return LoraConfig(
        r=int(config.lora["r"]),
        lora_alpha=int(config.lora["alpha"]),
        lora_dropout=float(config.lora["dropout"]),
        target_modules=ALL_LINEAR if targets == ALL_LINEAR else list(targets),
        task_type=task_type,
    )


def read_jsonl(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of a data file, each checked for the columns its trainer needs."""
    rows: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if len(line) > MAX_ROW_BYTES:
                raise TrainerError(f"{path.name} line {number}: longer than {MAX_ROW_BYTES // 2**20} MiB")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise TrainerError(f"{path.name} line {number}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                raise TrainerError(f"{path.name} line {number}: not a JSON object")
            missing = [key for key in required if key not in row]
            if missing:
                raise TrainerError(f"{path.name} line {number}: missing {', '.join(missing)}")
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise TrainerError(f"{path.name}: more than {MAX_ROWS} rows")
    if not rows:
        raise TrainerError(f"{path.name} has no rows")
    return rows


def load_tokenizer(path: Path) -> Any:
    """The tokenizer with the tool-call chat template the `hf` policy renders prompts with."""
    from transformers import AutoTokenizer

    from trajectories.policies.chat import load_tool_template, template_supports_tools

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    template = tokenizer.chat_template
    # Training must see the same dialect the policy is spoken to in; and the {% generation %}
    # markers in our template are what lets assistant-only loss mask tool observations out.
    if not template_supports_tools(template) or "generation" not in str(template):
        tokenizer.chat_template = load_tool_template()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def torch_dtype(config: TrainerConfig) -> Any:
    import torch

    name = str(config.raw.get("model", {}).get("torch_dtype") or "float32")
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise TrainerError(f"config.model.torch_dtype: unknown dtype {name!r}")
    return dtype


def bfloat16_training() -> bool:
    """Mixed precision in bfloat16: on a GPU that has it, or a CPU that computes it in hardware."""
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    return native_bfloat16()


def training_arguments(config: TrainerConfig) -> dict[str, Any]:
    """The TrainingArguments every kind shares, from the config's rl section."""
    import torch

    save = config.save_every_steps
    return {
        "output_dir": str(config.output_dir),
        "max_steps": config.max_steps,
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": "constant",
        "seed": config.seed,
        "logging_steps": 1,
        "include_num_input_tokens_seen": True,
        # Steps save checkpoints, with the training state a resume goes on from (training.trainers.resume:
        # only the newest keeps it); the DefaultFlowCallback saves the last step too.
        "save_strategy": "steps",
        "save_steps": save if save > 0 else config.max_steps,
        "save_only_model": False,
        "report_to": config.report_to,
        "disable_tqdm": True,
        "use_cpu": not torch.cuda.is_available(),
        # TRL turns bfloat16 mixed precision on by default. A CPU without bfloat16 in hardware (AVX2)
        # emulates it: a step ran several times slower than in float32 there.
        "bf16": bfloat16_training(),
        # Recomputing activations saves GPU memory on big models; on a CPU it only costs time.
        "gradient_checkpointing": torch.cuda.is_available(),
        "dataloader_num_workers": 0,
        "remove_unused_columns": False,
    }


def clean_checkpoint(path: Path) -> None:
    """Make a saved directory a plain from_pretrained checkpoint."""
    config_file = path / "config.json"
    try:
        saved = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return
    if any(key in saved for key in DROPPED_CONFIG_KEYS):
        for key in DROPPED_CONFIG_KEYS:
            saved.pop(key, None)
        config_file.write_text(json.dumps(saved, indent=2) + "\n")


HELD_IN_ROWS = 16  # rows of its own data a run's loss is measured on, before and after it trains


def run_training(trainer: Any, config: TrainerConfig, *, held_in: bool = True) -> None:
    """Train, going on from the checkpoint's whole training state when the run is resumed with it.

    A fresh run (`held_in`) also measures its loss on the first rows of its own data before and after,
    and says both (a `learned` event): a run that "succeeds" having learned nothing shows it."""
    if config.resume_state is not None:
        trainer.train(resume_from_checkpoint=str(config.resume_state))
        return
    if not held_in or config.step_offset:  # a run going on from weights alone has no "before" of its own
        trainer.train()
        return
    rows = trainer.train_dataset.select(range(min(HELD_IN_ROWS, len(trainer.train_dataset))))
    before = trainer.evaluate(eval_dataset=rows)["eval_loss"]
    trainer.train()
    after = trainer.evaluate(eval_dataset=rows)["eval_loss"]
    if all(isinstance(v, float) and math.isfinite(v) for v in (before, after)):
        emit({"event": "learned", "rows": len(rows), "loss_before": before, "loss_after": after})


def finish_setup(trainer: Any) -> None:
    """The Trainer's own printer would repeat every metric event as a Python dict on stdout."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def quiet_libraries() -> None:
    """Progress bars and advisory warnings are noise in a run's log tail."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets.utils.logging import disable_progress_bar as datasets_quiet
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    datasets_quiet()
