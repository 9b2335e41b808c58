"""The rl_config of a training run: parse YAML or JSON, check every field, resolve names.

The shape is the `rl_config.yaml` of docs/training.md (`model`, `environment`, `rl`, `data`, `logging`)
plus `kind`. Checking collects one clear message per field instead of stopping at the first,
so a researcher fixes a config in one round. Resolution turns names into what the trainer
subprocess needs: a model directory, a verified training set, a file that exists.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from annotation.models import ComparisonSet
from core.vocabulary import CheckpointKind, PairSides, PolicyKind, TrainingKind, values
from tasks.models import TaskSuite
from training.checkpoint_store import is_fetchable
from training.models import Checkpoint, TrainingSet
from training.processes import MAX_PROCESSES
from training.queries import find_training_set, set_spec
from training.schema import (
    EPISODE_PLACES,
    GRPO_MODES,
    RL_KEYS,
    TARGET_MODULES,
    check_generation,
    check_model,
    check_report_to,
    check_rl,
    targets_error,
    weight_modules,
    whole,
)
from trajectories.rollout_settings import RolloutError, RolloutSettings

# The keys of the rl_config shape; those Crucible does not use are accepted and kept as given,
# so a config written for another set-up in this shape validates. Anything else is a typo worth reporting.
SECTIONS: dict[str, frozenset[str]] = {
    "model": frozenset({"base_model", "load_in_4bit", "torch_dtype", "lora"}),
    "environment": frozenset(
        {"sandbox_type", "max_steps", "timeout_seconds", "mode", "episodes", "generation", "vllm_server_url"}
    ),
    "rl": RL_KEYS,
    "data": frozenset(
        {
            "training_set",
            "train_file",
            "comparison_set",
            "pair_sides",
            "task_dir",
            "filter_valid_tasks",
            "keep_failed_trajectories",
        }
    ),
    "logging": frozenset({"save_every_steps", "log_file", "report_to"}),
    # Evaluation during training: every `every`-th saved checkpoint is evaluated on `suite` by the
    # rollout fleet (evaluation.during_training), filling the run's reward-vs-pass@k chart.
    # How many processes train the run together (DDP); strategy and nodes as far as Crucible runs them.
    "resources": frozenset({"processes", "nodes", "strategy"}),
    "evaluation": frozenset(
        {"suite", "every", "k", "samples", "max_steps", "max_new_tokens", "temperature", "sandbox", "seed"}
    ),
}
# How an evaluation during training samples, where the section does not say.
EVALUATION_ROLLOUT = frozenset({"max_steps", "max_new_tokens", "temperature", "sandbox", "seed"})
TOP_LEVEL = frozenset({"kind", "name", *SECTIONS})
MAX_CONFIG_BYTES = 64 * 1024
NAME_MAX = 200


class ConfigError(ValueError):
    """A config that cannot run: one message per field, keyed by its dotted path."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {message}" for key, message in errors.items()))


@dataclass
class RunConfig:
    """A checked config and what its names resolved to."""

    kind: TrainingKind
    name: str
    config: dict[str, Any]  # the normalised config, as stored on the run
    base_model_dir: Path
    base_checkpoint: Checkpoint | None = None
    training_set: TrainingSet | None = None
    train_file: Path | None = None
    comparison_set: ComparisonSet | None = None  # reward and dpo: people's verdicts, frozen at launch
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dataset(self) -> str:
        if self.training_set is not None:
            return str(self.training_set)
        if self.comparison_set is not None:
            return f"comparison set {self.comparison_set.name}"
        return str(self.train_file) if self.train_file else ""


def parse(text: str) -> dict[str, Any]:
    """A config document (YAML, of which JSON is a subset) as a mapping."""
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise ConfigError({"config": f"is larger than {MAX_CONFIG_BYTES // 1024} KiB"})
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError({"config": f"is not valid YAML or JSON{where}"}) from None
    if not isinstance(raw, dict):
        raise ConfigError({"config": "must be a mapping with kind, model, rl, data and logging"})
    return raw


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class _Checker:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.errors: dict[str, str] = {}

    def error(self, key: str, message: str) -> None:
        self.errors.setdefault(key, message)

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(name, "must be a mapping")
            return {}
        for key in value:
            if key not in SECTIONS[name]:
                self.error(f"{name}.{key}", f"unknown key (known: {', '.join(sorted(SECTIONS[name]))})")
        return dict(value)


def check(raw: dict[str, Any]) -> RunConfig:
    """Check every field and resolve its names; raises ConfigError listing each bad field."""
    c = _Checker(raw)
    for key in raw:
        if key not in TOP_LEVEL:
            c.error(str(key), f"unknown key (known: {', '.join(sorted(TOP_LEVEL))})")
    kind_value = raw.get("kind")
    kind: TrainingKind | None = None
    if kind_value is None:
        c.error("kind", f"is missing: one of {', '.join(values(TrainingKind))}")
    elif kind_value not in values(TrainingKind):
        c.error("kind", f"unknown kind {str(kind_value)[:40]!r}: one of {', '.join(values(TrainingKind))}")
    else:
        kind = TrainingKind(kind_value)
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > NAME_MAX:
        c.error("name", f"must be text of at most {NAME_MAX} characters")
        name = ""
    model, environment, rl = c.section("model"), c.section("environment"), c.section("rl")
    data, logging_ = c.section("data"), c.section("logging")
    evaluation = _check_evaluation(c, c.section("evaluation"), kind)
    resources = _check_resources(c, c.section("resources"))

    rl = _check_rl(c, rl, kind)
    model, model_errors = check_model(model)
    for key, message in model_errors.items():
        c.error(key, message)
    if kind is TrainingKind.GRPO:
        mode = environment.get("mode", "single_turn")
        if mode not in GRPO_MODES:
            c.error("environment.mode", f"must be one of {', '.join(GRPO_MODES)}")
        environment["mode"] = mode
        _check_episodes(c, environment)
        for key, message in check_generation(environment).items():
            c.error(key, message)
    elif "generation" in environment or "vllm_server_url" in environment:
        c.error("environment.generation", f"applies to grpo runs only, not {kind}")
    save_every = whole(logging_.get("save_every_steps", rl.get("max_steps") or 1))
    if save_every is None or save_every < 1:
        c.error("logging.save_every_steps", "must be a positive whole number of steps")
    else:
        logging_["save_every_steps"] = save_every
    trackers, problem = check_report_to(logging_.get("report_to"))
    if problem:
        c.error("logging.report_to", problem)
    logging_["report_to"] = trackers

    base_dir, base_checkpoint = _resolve_model(c, model, kind)
    _check_targets(c, model, base_dir)
    training_set, train_file, comparison_set = _resolve_data(c, data, kind)
    _check_pair_sides(c, data, kind)
    if c.errors or kind is None or base_dir is None:
        raise ConfigError(c.errors)
    if base_checkpoint is not None:
        model["checkpoint"] = base_checkpoint.pk
    config = {
        "kind": kind.value,
        "name": name,
        "model": model,
        "environment": environment,
        "rl": rl,
        "data": data,
        "logging": logging_,
    }
    if evaluation:
        config["evaluation"] = evaluation
    if resources:
        config["resources"] = resources
    return RunConfig(
        kind=kind,
        name=name or f"{kind.value} of {Path(str(model['base_model'])).name}",
        config=config,
        base_model_dir=base_dir,
        base_checkpoint=base_checkpoint,
        training_set=training_set,
        train_file=train_file,
        comparison_set=comparison_set,
    )


def _check_rl(c: _Checker, rl: dict[str, Any], kind: TrainingKind | None) -> dict[str, Any]:
    out, errors = check_rl(rl, kind)
    for key, message in errors.items():
        c.error(key, message)
    return out


def _check_resources(c: _Checker, section: dict[str, Any]) -> dict[str, Any]:
    """resources: {processes, nodes: 1, strategy: ddp}. The worker that takes the run checks that it
    has that many GPUs or cores (training.processes); other topologies are an accelerate config file."""
    if not section:
        return {}
    processes = whole(section.get("processes", 1))
    if processes is None or not 1 <= processes <= MAX_PROCESSES:
        c.error("resources.processes", f"must be a whole number from 1 to {MAX_PROCESSES}")
    if section.get("nodes", 1) != 1:
        c.error(
            "resources.nodes",
            "Crucible runs a run on one machine: several need an accelerate config file on each "
            "(CRUCIBLE_ACCELERATE_CONFIG, docs/training.md)",
        )
    if section.get("strategy", "ddp") != "ddp":
        c.error(
            "resources.strategy",
            "ddp is the strategy a run can ask for; FSDP and DeepSpeed are an accelerate config file on the "
            "worker (CRUCIBLE_ACCELERATE_CONFIG, docs/training.md)",
        )
    return {"processes": processes, "nodes": 1, "strategy": "ddp"}


def _check_evaluation(c: _Checker, section: dict[str, Any], kind: TrainingKind | None) -> dict[str, Any]:
    """The evaluation section, complete (suite, every, k, samples and the rollout settings), or {}."""
    if not section:
        return {}
    if kind is TrainingKind.REWARD:
        c.error("evaluation", "a reward model is not evaluated as a policy: leave the section out of a reward run")
        return {}
    name = section.get("suite")
    if not isinstance(name, str) or not TaskSuite.objects.filter(name=name).exists():
        c.error("evaluation.suite", f"no task suite named {str(name)[:120]!r}")
    every = whole(section.get("every", 1))
    if every is None or every < 1:
        c.error("evaluation.every", "must be a positive whole number of checkpoints")
    given_k = section.get("k", [1])
    k_values = [whole(k) for k in (given_k if isinstance(given_k, list) else [given_k])]
    if not k_values or any(k is None or k < 1 for k in k_values):
        c.error("evaluation.k", "must be a positive whole number or a list of them")
        return {}
    k = sorted({int(value) for value in k_values if value is not None})
    samples = whole(section.get("samples", max(k)))
    if samples is None or samples < max(k):
        c.error("evaluation.samples", f"must be a whole number of rollouts per task, at least the largest k ({max(k)})")
        return {}
    rollout = {key: section[key] for key in EVALUATION_ROLLOUT if key in section}
    try:
        # The checkpoint is the hf policy; the settings are checked now, not at the first checkpoint.
        checked = RolloutSettings(PolicyKind.HF, "checkpoint", samples=samples, **rollout)
    except (RolloutError, TypeError) as exc:
        c.error("evaluation", str(exc))
        return {}
    settings = {key: getattr(checked, key) for key in EVALUATION_ROLLOUT}
    return {"suite": name, "every": every, "k": k, "samples": samples, **settings}


def _resolve_model(
    c: _Checker, model: dict[str, Any], kind: TrainingKind | None
) -> tuple[Path | None, Checkpoint | None]:
    ref = model.get("base_model")
    if not isinstance(ref, str) or not ref.strip():
        c.error("model.base_model", "is missing: a model directory or a registered checkpoint (checkpoint:<id>)")
        return None, None
    ref = ref.strip()
    checkpoint: Checkpoint | None = None
    if ref.startswith("checkpoint:"):
        ident = whole(ref.removeprefix("checkpoint:"))
        checkpoint = Checkpoint.objects.filter(pk=ident).first() if ident is not None else None
        if checkpoint is None:
            c.error("model.base_model", f"no registered checkpoint {ref!r}")
            return None, None
        path = Path(checkpoint.path)
    else:
        path = Path(ref) if Path(ref).is_absolute() else Path(settings.BASE_DIR) / ref
        checkpoint = Checkpoint.objects.filter(path=str(path.resolve())).first()
    # A checkpoint saved on another host is fetched where the trainer runs (training.launcher).
    if not (path / "config.json").is_file() and not (checkpoint is not None and is_fetchable(checkpoint)):
        c.error("model.base_model", f"unknown model: {ref!r} is not a directory with a config.json")
        return None, None
    if checkpoint is not None and checkpoint.kind == CheckpointKind.REWARD and kind is not TrainingKind.REWARD:
        c.error("model.base_model", f"checkpoint {checkpoint.pk} is a reward model; a {kind} run needs a policy")
    model["base_model"] = str(path.resolve())
    return path.resolve(), checkpoint


def _check_targets(c: _Checker, model: dict[str, Any], base_dir: Path | None) -> None:
    """model.lora.target_modules against the base's modules, where its weights are on this host (the
    trainer checks again against the loaded model)."""
    lora = model.get("lora")
    if base_dir is None or not isinstance(lora, dict) or TARGET_MODULES not in lora:
        return
    modules = weight_modules(base_dir)
    problem = targets_error(lora[TARGET_MODULES], modules) if modules else None
    if problem:
        c.error(f"model.lora.{TARGET_MODULES}", problem)


# The data a run trains on: one of these keys of `data`.
DATA_SOURCES = ("training_set", "train_file", "comparison_set")
PREFERENCE_KINDS = (TrainingKind.REWARD, TrainingKind.DPO)


def _resolve_data(
    c: _Checker, data: dict[str, Any], kind: TrainingKind | None
) -> tuple[TrainingSet | None, Path | None, ComparisonSet | None]:
    given = [key for key in DATA_SOURCES if data.get(key)]
    if len(given) > 1:
        both = "both" if len(given) == 2 else "all of"
        c.error("data", f"give one of data.{', data.'.join(DATA_SOURCES)}: not {both} {' and '.join(given)}")
        return None, None, None
    if not given:
        c.error(
            "data.training_set",
            "missing data set: give data.training_set (name or name@version), data.train_file, or "
            "data.comparison_set (reward and dpo)",
        )
        return None, None, None
    if given[0] == "comparison_set":
        return None, None, _resolve_comparison_set(c, data, kind)
    if given[0] == "train_file":
        file_ref = data["train_file"]
        path = Path(str(file_ref))
        path = path if path.is_absolute() else Path(settings.BASE_DIR) / path
        if not path.is_file():
            c.error("data.train_file", f"no such file: {str(file_ref)[:300]}")
            return None, None, None
        data["train_file"] = str(path.resolve())
        return None, path.resolve(), None
    set_ref = data["training_set"]
    training_set = _training_set(str(set_ref))
    if training_set is None:
        c.error("data.training_set", f"no training set {str(set_ref)[:120]!r}")
        return None, None, None
    if not set_spec(training_set) or not training_set.stats.get("verified"):
        c.error(
            "data.training_set",
            f"{training_set} is not verified: it was not chosen by rewards Crucible computed under a reward spec; "
            "freeze a new version from scored trajectories",
        )
        return None, None, None
    if not training_set.trajectory_ids:
        c.error("data.training_set", f"{training_set} is empty")
        return None, None, None
    data["training_set"] = str(training_set)
    return training_set, None, None


def _check_episodes(c: _Checker, environment: dict[str, Any]) -> None:
    """environment.episodes: where a GRPO agent run's episodes run (training.schema.EPISODE_PLACES);
    the fleet runs agent episodes only (a single-turn generation is one reply, nothing to farm out)."""
    value = environment.get("episodes", "trainer")
    if value not in EPISODE_PLACES:
        c.error("environment.episodes", f"must be one of {', '.join(EPISODE_PLACES)}")
        return
    if value == "fleet" and environment.get("mode") != "agent":
        c.error("environment.episodes", "fleet runs agent episodes: set environment.mode: agent")
        return
    environment["episodes"] = value


def _check_pair_sides(c: _Checker, data: dict[str, Any], kind: TrainingKind | None) -> None:
    """data.pair_sides: what each side of a reward or DPO pair shows, its turns and patch or the patch
    alone; kept in the stored config (default turns) so the run says which it trained on."""
    if kind not in PREFERENCE_KINDS:
        if "pair_sides" in data:
            c.error("data.pair_sides", f"shapes the pairs of reward and dpo runs, not {kind}")
        return
    value = data.get("pair_sides", PairSides.TURNS.value)
    if value not in {s.value for s in PairSides}:
        c.error("data.pair_sides", f"must be one of {', '.join(s.value for s in PairSides)}")
        return
    data["pair_sides"] = value


def _resolve_comparison_set(c: _Checker, data: dict[str, Any], kind: TrainingKind | None) -> ComparisonSet | None:
    """A comparison set as a reward or DPO run's data: its verdicts, exported when the run is created."""
    name = data["comparison_set"]
    if kind is not None and kind not in PREFERENCE_KINDS:
        c.error("data.comparison_set", f"people's verdicts train reward and dpo runs, not {kind}")
        return None
    found = ComparisonSet.objects.filter(name=str(name)).first() if isinstance(name, str) else None
    if found is None:
        c.error("data.comparison_set", f"no comparison set {str(name)[:120]!r}")
    return found


def _training_set(ref: str) -> TrainingSet | None:
    try:
        return find_training_set(ref)
    except ValueError:
        return None
