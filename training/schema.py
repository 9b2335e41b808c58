"""The numbers of a training config's `rl` section: one declaration, read by both checkers.

The Django side (training.config, when a run is created from the page, the API or the command)
and the trainer (training.trainers.common, which re-reads the run directory's config.json on a
GPU host, where the file may come from anywhere) check the same fields against the same bounds
with the same defaults, because both read this table. Plain Python: the trainer has no Django.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.vocabulary import TrainingKind

STEP_LIMIT = 1_000_000
# How a grpo run meets its tasks: one completion scored as a patch, or an agent episode in a sandbox.
GRPO_MODES = ("single_turn", "agent")
# Where a GRPO agent run's episodes run: in the trainer's process (TRL's environment_factory), or as
# rollouts on the Celery `rollouts` workers against the served policy (training.trainers.grpo_fleet).
EPISODE_PLACES = ("trainer", "fleet")
# Where a GRPO run's generations are sampled when its episodes are the trainer's: `model.generate`
# in the trainer, or vLLM through TRL's own support (colocate: in the trainer's process, sharing its
# GPU; server: a `trl vllm-serve` process the trainer syncs its weights to after each step).
GENERATION_PLACES = ("trainer", "vllm_colocate", "vllm_server")
VLLM_NEEDS = (
    "needs the vllm package and a CUDA GPU where the trainer runs (vLLM has no CPU path here); "
    "use environment.generation: trainer, or episodes on the fleet"
)
MIN_LENGTH = 16  # tokens: below this no chat prompt fits
# Fleet episodes one generation ahead were sampled by weights up to max_staleness steps old: their
# negative-advantage sequences that the current policy has moved far from are left out of the loss.
STALE_FLEET_MASK = 0.5
_HTTP_URL = re.compile(r"^https?://[A-Za-z0-9.\-]{1,253}(:\d{1,5})?(/[^\s]{0,200})?$")


Value = int | float | str | bool


@dataclass(frozen=True)
class Setting:
    """One setting of `rl`: its type, default, bounds, and what a wrong value is told."""

    key: str
    whole: bool  # an int (True) or a float; ignored for choices and flags
    default: Value | None  # None: absent unless given; `derived` says what the trainer does then
    help: str  # what it does, for docs/training.md and the error
    minimum: float | None = None
    above: bool = False  # strictly above the minimum
    maximum: float | None = None
    below: bool = False  # strictly below the maximum
    kinds: tuple[TrainingKind, ...] = ()  # only these kinds take it (empty: every kind)
    defaulted: tuple[TrainingKind, ...] | None = None  # kinds that get the default when it is absent (None: all)
    message: str = ""  # what a wrong value is told, where the bounds alone do not say it well
    choices: tuple[str, ...] = ()  # a text setting: one of these
    flag: bool = False  # a setting that is true or false
    derived: str = ""  # what stands for an absent value whose default is None (docs/training.md)

    def coerce(self, value: Any) -> Value | None:
        """The value as this setting's type, or None when it is not one or out of bounds."""
        if self.flag:
            return value if isinstance(value, bool) else None
        if self.choices:
            return value if isinstance(value, str) and value in self.choices else None
        got = whole(value) if self.whole else number(value)
        if got is None or not math.isfinite(got):
            return None
        if self.minimum is not None and (got <= self.minimum if self.above else got < self.minimum):
            return None
        if self.maximum is not None and (got >= self.maximum if self.below else got > self.maximum):
            return None
        return got

    def applies(self, kind: TrainingKind | None) -> bool:
        return not self.kinds or kind in self.kinds

    def defaults_for(self, kind: TrainingKind | None) -> bool:
        return self.applies(kind) and (self.defaulted is None or kind in self.defaulted)


_POSITIVE = f"must be a positive whole number (at most {STEP_LIMIT})"
GRPO = (TrainingKind.GRPO,)

# Defaults small enough for the bundled model on a CPU; a GPU user raises them in the config.
RL_SETTINGS: tuple[Setting, ...] = (
    Setting("max_steps", True, 10, "optimizer steps of the run", 1, maximum=STEP_LIMIT),
    Setting("batch_size", True, 2, "rows per device and step (grpo: generations, whole groups)", 1, maximum=STEP_LIMIT),
    Setting("gradient_accumulation_steps", True, 1, "batches per optimizer step", 1, maximum=STEP_LIMIT),
    Setting("learning_rate", False, 1e-5, "the optimizer's step size, e.g. 1e-5", 0, True, 1, True),
    Setting("kl_coef", False, 0.05, "dpo's beta; grpo's KL weight against the base", 0),
    Setting(
        "max_length",
        True,
        None,
        "tokens of prompt and answer kept; a value that would cut a row's last assistant turn is refused "
        "(sft, dpo), longer pairs are dropped (reward)",
        MIN_LENGTH,
        maximum=STEP_LIMIT,
        defaulted=(),
        message=f"must be a whole number of tokens, at least {MIN_LENGTH}",
        derived="the longest row, at most the model's context",
    ),
    Setting(
        "max_new_tokens",
        True,
        512,
        "tokens per generation (grpo; agent mode: the whole episode); generations that reach it are "
        "counted (clipped_ratio)",
        1,
        maximum=STEP_LIMIT,
        defaulted=GRPO,
    ),
    Setting("temperature", False, 1.0, "sampling temperature of generations (grpo)", 0, True, 5, defaulted=GRPO),
    Setting(
        "num_generations",
        True,
        2,
        "generations per prompt that grpo compares",
        2,
        kinds=GRPO,
        message="must be at least 2: GRPO compares generations of one prompt",
    ),
    Setting(
        "epsilon",
        False,
        0.2,
        "grpo's clip range: how far one update may move a token's probability ratio from 1",
        0,
        True,
        1,
        kinds=GRPO,
    ),
    Setting(
        "loss_type",
        False,
        "dapo",
        "how grpo averages token losses (TRL's loss_type)",
        kinds=GRPO,
        choices=("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo"),
    ),
    Setting(
        "mask_truncated_completions",
        False,
        False,
        "leave generations that reached max_new_tokens out of grpo's loss",
        kinds=GRPO,
        flag=True,
    ),
    Setting(
        "max_prompt_length",
        True,
        None,
        "tokens of a grpo prompt; longer prompts are dropped and counted (prompts_dropped_for_length)",
        MIN_LENGTH,
        maximum=STEP_LIMIT,
        kinds=GRPO,
        defaulted=(),
        message=f"must be a whole number of tokens, at least {MIN_LENGTH}",
        derived="no limit",
    ),
    Setting(
        "reward_clip",
        False,
        None,
        "grpo rewards are clipped to [-c, c] before groups are compared",
        0,
        True,
        kinds=GRPO,
        defaulted=(),
        message="must be a number c > 0: grpo rewards are clipped to [-c, c] (Crucible's lie in [-1, 1])",
        derived="no clipping",
    ),
    Setting(
        "max_staleness",
        True,
        0,
        "grpo with environment.episodes fleet: how many optimizer steps the served policy may lag the "
        "trainer's weights; it is synced when it would lag more (0: every step)",
        0,
        maximum=STEP_LIMIT,
        kinds=GRPO,
    ),
    Setting(
        "off_policy_mask",
        False,
        None,
        "grpo: a generation with a negative advantage whose mean per-token KL between the policy that "
        "sampled it and the one learning is above this is left out of the loss (TRL's "
        "off_policy_mask_threshold: the off-policy sequence mask of DeepSeek-V3.2)",
        0,
        True,
        kinds=GRPO,
        defaulted=(),
        message="must be a number > 0, e.g. 0.5",
        derived=f"{STALE_FLEET_MASK} for fleet episodes with rl.max_staleness >= 1, else off",
    ),
    Setting("seed", True, 0, "the seed of the trainer's random numbers"),
)
RL = {setting.key: setting for setting in RL_SETTINGS}
# Keys of the rl section that Crucible accepts and keeps without using (other set-ups use them).
RL_KEPT = frozenset({"trajectory_dir"})
RL_KEYS = frozenset(RL) | RL_KEPT

# A run trains every weight unless `model.lora` asks for low-rank adapters (peft), which then alone train;
# 4-bit weights (QLoRA) train only that way, and bitsandbytes' 4-bit kernels need CUDA.
LOAD_IN_4BIT = (
    "must be false unless model.lora is set: 4-bit weights train only through adapters (model.lora); "
    "to save memory set model.lora, model.torch_dtype: bfloat16 or lower rl.batch_size and rl.max_length"
)
LOAD_IN_4BIT_NEEDS = (
    "needs CUDA and the bitsandbytes package where the trainer runs (its 4-bit kernels); "
    "set it false, or run on a GPU host with bitsandbytes installed"
)
# The numbers of `model.lora`: peft's LoraConfig r, lora_alpha and lora_dropout.
LORA_SETTINGS: tuple[Setting, ...] = (
    Setting("r", True, 16, "the adapters' rank", 1, maximum=4096, message="must be a whole number from 1 to 4096"),
    Setting(
        "alpha",
        True,
        32,
        "the adapters' scale is alpha / r",
        1,
        maximum=65536,
        message="must be a whole number from 1 to 65536",
    ),
    Setting("dropout", False, 0.05, "dropout on the adapters' input", 0, maximum=1, below=True),
)
LORA = {setting.key: setting for setting in LORA_SETTINGS}
# Every linear layer but the output head (peft's "all-linear"), or a list of module names.
ALL_LINEAR = "all-linear"
TARGET_MODULES = "target_modules"
LORA_KEYS = frozenset(LORA) | {TARGET_MODULES}
TARGETS_RULE = (
    f"must be {ALL_LINEAR} or a list of module names of the model (e.g. [q_proj, v_proj]), "
    "each the last part of a module's name"
)


# Experiment trackers a run reports its metrics to besides Crucible (`logging.report_to`): TensorBoard
# event files in the run's output directory by default (tensorboardX is a dependency); W&B and MLflow
# where the trainer's host has them installed and configured.
TRACKERS = ("tensorboard", "wandb", "mlflow")
TRACKERS_DEFAULT = ("tensorboard",)
TRACKERS_RULE = f"must be none, or one or a list of {', '.join(TRACKERS)}"


def check_report_to(value: Any) -> tuple[list[str], str | None]:
    """`logging.report_to` as a list of trackers (none: []), or an error."""
    if value is None:
        return list(TRACKERS_DEFAULT), None
    if value == "none":
        return [], None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or any(name not in TRACKERS for name in names):
        return [], TRACKERS_RULE
    return sorted(set(names), key=TRACKERS.index), None


def check_model(model: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`model` with `lora` checked and its defaults filled in, and an error per key no trainer can honour
    (keyed `model.<key>`, `model.lora.<key>`)."""
    out = dict(model)
    errors: dict[str, str] = {}
    four_bit = model.get("load_in_4bit", False)
    if not isinstance(four_bit, bool):
        errors["model.load_in_4bit"] = "must be true or false"
    elif four_bit and model.get("lora") is None:
        errors["model.load_in_4bit"] = LOAD_IN_4BIT
    if model.get("lora") is not None:
        out["lora"], lora_errors = check_lora(model["lora"])
        errors.update(lora_errors)
    return out, errors


def check_lora(lora: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """`model.lora` with its defaults filled in, and an error per bad key (keyed `model.lora.<key>`)."""
    if not isinstance(lora, dict):
        return {}, {"model.lora": "must be a mapping of r, alpha, dropout and target_modules"}
    errors = {
        f"model.lora.{key}": f"unknown key (known: {', '.join(sorted(LORA_KEYS))})"
        for key in lora
        if key not in LORA_KEYS
    }
    out: dict[str, Any] = {}
    for setting in LORA_SETTINGS:
        got = setting.coerce(lora.get(setting.key, setting.default))
        if got is None:
            errors[f"model.lora.{setting.key}"] = rule(setting)
        else:
            out[setting.key] = got
    targets = lora.get(TARGET_MODULES, ALL_LINEAR)
    if isinstance(targets, str) and targets.strip():
        targets = targets.strip() if targets.strip() == ALL_LINEAR else [targets.strip()]
    if targets == ALL_LINEAR or (
        isinstance(targets, list)
        and targets
        and all(isinstance(name, str) and name.strip() and name.strip() != ALL_LINEAR for name in targets)
    ):
        out[TARGET_MODULES] = targets if targets == ALL_LINEAR else [name.strip() for name in targets]
    else:
        errors[f"model.lora.{TARGET_MODULES}"] = TARGETS_RULE
    return out, errors


def missing_targets(targets: str | list[str], module_names: set[str]) -> list[str]:
    """The names in `targets` that match no module of the model, as peft matches them (the whole
    name or its last parts)."""
    if targets == ALL_LINEAR:
        return []
    return [
        target for target in targets if not any(name == target or name.endswith(f".{target}") for name in module_names)
    ]


def targets_error(targets: str | list[str], module_names: set[str]) -> str | None:
    """What `model.lora.target_modules` is told when some of its names are not the model's modules."""
    missing = missing_targets(targets, module_names)
    if not missing:
        return None
    last = sorted({name.rsplit(".", 1)[-1] for name in module_names if name})
    return (
        f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not a module of the model "
        f"(its modules end in: {', '.join(last[:40])}{', ...' if len(last) > 40 else ''}); or use {ALL_LINEAR}"
    )


def weight_modules(model_dir: Path) -> set[str] | None:
    """The modules a checkpoint holds weights of, from its safetensors headers (no torch); None when
    the directory has no safetensors to read them from."""
    index = model_dir / "model.safetensors.index.json"
    try:
        if index.is_file():
            keys = set(json.loads(index.read_text())["weight_map"])
        else:
            with (model_dir / "model.safetensors").open("rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                if not 0 < size <= SAFETENSORS_HEADER_LIMIT:
                    return None
                keys = set(json.loads(handle.read(size))) - {"__metadata__"}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    names = {key.rsplit(".", 1)[0] for key in keys if "." in key}
    try:
        saved = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        saved = {}
    # A head tied to the embeddings is a module whose weight is saved once, under the embeddings.
    if isinstance(saved, dict) and saved.get("tie_word_embeddings"):
        names.add("lm_head")
    return names


SAFETENSORS_HEADER_LIMIT = 100 * 1024 * 1024


def rule(setting: Setting) -> str:
    """What a wrong value of `setting` is told."""
    if setting.message:
        return setting.message
    if setting.flag:
        return "must be true or false"
    if setting.choices:
        return f"must be one of {', '.join(setting.choices)}"
    if setting.whole:
        return "must be a whole number" if setting.minimum is None else _POSITIVE
    if setting.maximum is not None and setting.minimum is not None:
        return f"must be a number between {setting.minimum:g} and {setting.maximum:g}" + (
            f", e.g. {setting.default:g}" if setting.below else ""
        )
    return f"must be a number of at least {setting.minimum:g}"


def check_rl(rl: dict[str, Any], kind: TrainingKind | None) -> tuple[dict[str, Any], dict[str, str]]:
    """`rl` with its defaults filled in and its numbers normalised, and an error per bad key
    (keyed `rl.<key>`). Keys this table does not declare are kept as given."""
    out = {key: value for key, value in rl.items()}
    errors: dict[str, str] = {}
    for setting in RL_SETTINGS:
        if setting.key not in out:
            if setting.defaults_for(kind) and setting.default is not None:
                out[setting.key] = setting.default
            continue
        if not setting.applies(kind):
            errors[f"rl.{setting.key}"] = f"applies to {' and '.join(setting.kinds)} runs only"
            continue
        got = setting.coerce(out[setting.key])
        if got is None:
            errors[f"rl.{setting.key}"] = rule(setting)
        else:
            out[setting.key] = got
    batch, generations = out.get("batch_size"), out.get("num_generations")
    if kind is TrainingKind.GRPO and not errors.keys() & {"rl.batch_size", "rl.num_generations"}:
        if isinstance(batch, int) and isinstance(generations, int) and batch % generations:
            errors["rl.batch_size"] = (
                f"rl.batch_size ({batch}) must be a multiple of rl.num_generations ({generations}): "
                "each batch holds whole groups of generations of one prompt"
            )
    return out, errors


def number(value: Any) -> float | None:
    """A number from a config value, else None. YAML 1.1 reads `1e-6` (no dot) as text, and configs
    often write learning rates that way."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def whole(value: Any) -> int | None:
    """A whole number from a config value (an int, or digits as text), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def bounds(setting: Setting) -> str:
    """The values `setting` takes, as docs/training.md's table says them."""
    if setting.flag:
        return "true or false"
    if setting.choices:
        return "one of " + ", ".join(f"`{choice}`" for choice in setting.choices)
    low = "" if setting.minimum is None else f"{'>' if setting.above else '≥'} {_shown(setting.minimum)}"
    high = "" if setting.maximum is None else f"{'<' if setting.below else '≤'} {_shown(setting.maximum)}"
    kind = "whole number" if setting.whole else "number"
    return ", ".join(part for part in (kind, low, high) if part)


def lora_doc_rows() -> list[str]:
    """The rows of docs/training.md's table of `model.lora` (a test keeps the page in step)."""
    rows = [
        f"| `{setting.key}` | {_shown(setting.default)} | {bounds(setting)} | {setting.help} |"
        for setting in LORA_SETTINGS
        if setting.default is not None
    ]
    rows.append(
        f"| `{TARGET_MODULES}` | `{ALL_LINEAR}` | `{ALL_LINEAR}` or a list of module names | the layers that get "
        "adapters: every linear layer but the output head, or the modules whose names end in these |"
    )
    return rows


def doc_rows() -> list[str]:
    """The rows of docs/training.md's table of rl settings (a test keeps the page in step)."""
    rows = []
    for setting in RL_SETTINGS:
        kinds = " and ".join(setting.kinds) if setting.kinds else "all"
        default = setting.derived if setting.default is None else _shown(setting.default)
        rows.append(f"| `{setting.key}` | {default} | {bounds(setting)} | {kinds} | {setting.help} |")
    return rows


def _shown(value: Value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_generation(environment: dict[str, Any]) -> dict[str, str]:
    """environment.generation and environment.vllm_server_url, normalised in place; an error per bad key.

    The server's URL is the operator's (the run's config), never an agent's: checked for shape only.
    """
    errors: dict[str, str] = {}
    place = environment.get("generation", "trainer")
    url = environment.get("vllm_server_url")
    if place not in GENERATION_PLACES:
        return {"environment.generation": f"must be one of {', '.join(GENERATION_PLACES)}"}
    if place != "trainer" and environment.get("episodes", "trainer") == "fleet":
        errors["environment.generation"] = (
            "fleet episodes are sampled by the trainer's policy server; vLLM generation applies to episodes "
            "in the trainer (environment.episodes: trainer)"
        )
    if place == "vllm_server":
        if not isinstance(url, str) or not _HTTP_URL.match(url):
            errors["environment.vllm_server_url"] = (
                "must be the http(s) URL of a `trl vllm-serve` server, e.g. http://10.0.0.2:8000"
            )
    elif url is not None:
        errors["environment.vllm_server_url"] = "applies to environment.generation: vllm_server only"
    environment["generation"] = place
    return errors
