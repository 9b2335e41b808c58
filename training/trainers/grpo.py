"""Online RL: GRPO whose reward is Crucible's verified reward (docs/training.md).

Two modes (`environment.mode`):
- single_turn: the model is shown the statement and the files the task is about and writes a
  unified diff; the diff is scored like any trajectory's patch.
- agent: TRL's `environment_factory` runs a multi-turn episode through the sandbox tools (the
  `hf` policy's tools); the episode's diff is scored when it ends.
Every generation is reported as a rollout event with its reward and breakdown, so the launcher
can store it as a trajectory of the run. rl.kl_coef is GRPO's beta.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from core.vocabulary import Termination
from training.schema import STALE_FLEET_MASK
from training.trainers.common import (
    TrainerConfig,
    TrainerError,
    emit,
    finish_setup,
    load_tokenizer,
    log,
    peft_config,
    quantized,
    read_jsonl,
    run_training,
    torch_dtype,
    training_arguments,
)
from training.trainers.events import EventCallback
from training.trainers.grpo_env import (
    CrucibleEnv,
    Scorer,
    completion_steps,
    completion_text,
    extract_patch,
    single_turn_prompt,
    statement_of,
    tool_call_validity,
)
from training.trainers.grpo_fleet import Fleet, fleet_prompt
from trajectories.agent import system_prompt

GRPO_KEYS = ("prompt", "task_id", "task_dir")
# At most this many patches of one generation are scored at once, however many cores the host has.
MAX_SCORE_WORKERS = 8
# vLLM's share of the GPU in colocate mode: the rest holds the policy being trained.
VLLM_COLOCATE_MEMORY = 0.3


def grpo_rows(config: TrainerConfig, scorer: Scorer) -> list[dict[str, Any]]:
    rows = []
    for number, row in enumerate(read_jsonl(config.train_file, GRPO_KEYS), start=1):
        task_dir = str(row["task_dir"])
        try:
            scorer.task(task_dir)  # a bad directory fails now, not after the first generation
        except TrainerError as exc:
            raise TrainerError(f"row {number}: {exc}") from None
        statement = statement_of(row["prompt"])
        language = scorer.task(task_dir).language  # the system prompt names it, as the agent's does
        if config.mode == "single_turn":
            prompt = single_turn_prompt(statement, task_dir, language)
        elif config.episodes == "fleet":
            prompt = fleet_prompt(statement, str(row["task_id"]))
        else:
            prompt = [{"role": "system", "content": system_prompt(language)}, {"role": "user", "content": statement}]
        rows.append({"prompt": prompt, "task_id": str(row["task_id"]), "task_dir": task_dir})
    return rows


def _fleet_rewards(kwargs: dict[str, Any]) -> list[float | None]:
    """The reward service's verdicts on the fleet's episodes (None: left out of the loss, see grpo_fleet)."""
    rewards = kwargs["fleet_reward"]
    staleness = [s for s in kwargs["fleet_staleness"] if s is not None]
    for index, reward in enumerate(rewards):
        emit(
            {
                "event": "rollout",
                # The episode's own task: one generation ahead, TRL's rows are the next step's prompts.
                "task_id": kwargs["fleet_task"][index],
                "mode": "agent",
                "episodes": "fleet",
                # Already stored by the rollouts worker, scored by the reward service: the launcher
                # links it to the run instead of writing a copy.
                "trajectory_id": kwargs["fleet_trajectory"][index],
                "reward": reward,
                "step": kwargs["fleet_step"][index],
                "policy_version": kwargs["fleet_version"][index],
                "staleness": kwargs["fleet_staleness"][index],
                "dropped": kwargs["fleet_dropped"][index],
                "truncated": kwargs["fleet_truncated"][index],
            },
            every_rank=True,
        )
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        if staleness:
            log_metric("staleness_mean", sum(staleness) / len(staleness))
            log_metric("staleness_max", float(max(staleness)))
        log_metric("episodes_dropped", float(sum(1 for why in kwargs["fleet_dropped"] if why)))
    return rewards


def _rollout(task_id: str, mode: str, completion: Any, patch: str, score: Any) -> float:
    reward = float(score.reward) if score is not None else 0.0
    emit(
        {
            "event": "rollout",
            "task_id": task_id,
            "mode": mode,
            "completion": completion_text(completion),
            # Agent episodes as steps, so the launcher can store them as trajectories of the run.
            "steps": completion_steps(completion) if mode == "agent" else [],
            "patch": patch,
            "reward": reward,
            "resolved": bool(score.resolved) if score is not None else False,
            "breakdown": score.breakdown if score is not None else {},
            "flags": [f.to_json() for f in score.flags] if score is not None else [],
        },
        every_rank=True,
    )
    return reward


def prompts_within(tokenizer: Any, rows: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The rows whose prompt (as the chat template renders it for generation) fits rl.max_prompt_length."""
    if limit is None:
        return rows
    kept = [
        row
        for row in rows
        if len(
            tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        <= limit
    ]
    if not kept:
        raise TrainerError(
            f"every one of the {len(rows)} prompts is longer than rl.max_prompt_length ({limit}): raise it, "
            "or leave it out (no limit)"
        )
    if len(kept) < len(rows):
        log(f"grpo: dropped {len(rows) - len(kept)} of {len(rows)} prompts longer than {limit} tokens")
    return kept


def enough_prompts(count: int, config: TrainerConfig) -> None:
    """A step compares batch_size / num_generations prompts' groups; with fewer rows TRL's sampler
    yields no batch at all, and the run would end at step 0 as if it had succeeded."""
    per_step = max(1, config.batch_size // config.num_generations)
    if count < per_step:
        raise TrainerError(
            f"each step needs {per_step} prompts (rl.batch_size {config.batch_size} / rl.num_generations "
            f"{config.num_generations}), and the data has {count}: lower rl.batch_size, or give more tasks"
        )


def clipped(reward: float, clip: float | None) -> float:
    """rl.reward_clip: the reward the groups compare, within [-clip, clip]."""
    return reward if clip is None else max(-clip, min(clip, reward))


def score_workers(count: int, cpus: int | None = None) -> int:
    """How many of a generation's patches are scored at once on the trainer's host.

    Each score runs up to three sandboxes side by side (rewards.scoring), so half the cores keeps
    them busy without starving the trainer's own process; a 2-core host scores one at a time.
    Measured on one H200 with 16 cores: scoring 16 patches one after another left the GPU idle
    for about 7.5 s of a 25 s step (docs/training.md).
    """
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(count, cpus // 2, MAX_SCORE_WORKERS))


def _scored(
    scorer: Scorer, mode: str, completions: list[Any], task_dir: list[str], environments: list[Any]
) -> list[Any]:
    """(patch, score) per completion, in order, scored by up to score_workers() at once."""

    def one(index: int) -> tuple[str, Any]:
        if mode == "agent" and index < len(environments):
            return environments[index]._finish()
        patch = extract_patch(completion_text(completions[index]))
        # An answer with no diff is an empty patch: scored, never skipped (it must not look neutral).
        return patch, scorer.score(task_dir[index], patch, Termination.SUBMITTED)

    workers = score_workers(len(completions))
    if workers == 1:
        return [one(index) for index in range(len(completions))]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="score") as pool:
        return list(pool.map(one, range(len(completions))))


def reward_function(scorer: Scorer, mode: str, clip: float | None = None) -> Callable[..., list[float | None]]:
    def crucible_verified_reward(
        prompts: list[Any], completions: list[Any], task_id: list[str], task_dir: list[str], **kwargs: Any
    ) -> list[float | None]:
        if "fleet_reward" in kwargs:
            return [None if r is None else clipped(r, clip) for r in _fleet_rewards(kwargs)]
        rewards: list[float | None] = []
        valid = turns = 0
        environments = kwargs.get("environments") or []
        # Scored side by side, reported in order: the events read as one rollout after another.
        started = time.monotonic()
        scored = _scored(scorer, mode, completions, task_dir, environments)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            # The part of a step the trainer's accelerator waits through (beside TRL's step_time).
            log_metric("score_s", time.monotonic() - started)
        for index, (patch, score) in enumerate(scored):
            if mode == "agent" and index < len(environments):
                ok, seen = tool_call_validity(completions[index])
                valid, turns = valid + ok, turns + seen
            # The rollout keeps the reward as scored; the groups compare the clipped one.
            rewards.append(clipped(_rollout(task_id[index], mode, completions[index], patch, score), clip))
        if mode == "agent" and turns and callable(log_metric):
            log_metric("tool_call_validity", valid / turns)
        return rewards

    return crucible_verified_reward


def off_policy_threshold(config: TrainerConfig) -> float | None:
    """rl.off_policy_mask as given; else on for fleet episodes that may be stale (rl.max_staleness >= 1).

    Such an episode was sampled by the served copy, up to max_staleness optimizer steps behind; the
    fleet hands TRL the logprobs it was sampled with, so the mask compares the sampler with the
    weights that learn from it. Fresh samples (staleness 0, or episodes in the trainer) need no mask.
    """
    if config.off_policy_mask is not None:
        return config.off_policy_mask
    if config.mode == "agent" and config.episodes == "fleet" and config.max_staleness >= 1:
        return STALE_FLEET_MASK
    return None


def generation_arguments(config: TrainerConfig) -> dict[str, Any]:
    """GRPOConfig's vLLM settings for environment.generation (none: `model.generate` in the trainer).

    TRL syncs the trainer's weights to vLLM before each generation, so every sample comes from the
    current policy (staleness 0); its importance-sampling correction covers what differs between
    vLLM's sampler and the trainer's logprobs.
    """
    if config.generation == "vllm_colocate":
        return {
            "use_vllm": True,
            "vllm_mode": "colocate",
            # The trainer's weights, gradients and optimizer share the card with vLLM's KV cache.
            "vllm_gpu_memory_utilization": VLLM_COLOCATE_MEMORY,
            "vllm_importance_sampling_correction": True,
        }
    if config.generation == "vllm_server":
        return {
            "use_vllm": True,
            "vllm_mode": "server",
            "vllm_server_base_url": str(config.environment["vllm_server_url"]),
            "vllm_importance_sampling_correction": True,
        }
    return {}


def train(config: TrainerConfig) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    scorer = Scorer(backend=config.sandbox_backend or Scorer.backend)
    rows = grpo_rows(config, scorer)
    tokenizer = load_tokenizer(config.base_model)
    tokenizer.padding_side = "left"
    agent = config.mode == "agent"
    fleet = Fleet(config, tokenizer) if agent and config.episodes == "fleet" else None
    if agent and fleet is None:
        # Our template is Qwen2.5's tool-call convention; TRL reads calls back with Qwen's parser.
        tokenizer.response_template = qwen3_template
        CrucibleEnv.scorer = scorer
        CrucibleEnv.command_timeout = float(config.environment.get("timeout_seconds", 60) or 60)
    kept = prompts_within(tokenizer, rows, config.max_prompt_length)
    enough_prompts(len(kept), config)
    model = AutoModelForCausalLM.from_pretrained(str(config.base_model), dtype=torch_dtype(config), **quantized(config))
    shared = training_arguments(config)
    shared["include_num_input_tokens_seen"] = False  # GRPO counts its own tokens (num_tokens)
    args = GRPOConfig(
        **shared,
        num_generations=config.num_generations,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature or 1.0,
        beta=config.kl_coef,
        epsilon=config.epsilon,
        loss_type=config.loss_type,
        mask_truncated_completions=config.mask_truncated_completions,
        max_tool_calling_iterations=int(config.environment.get("max_steps", 30)) if agent and not fleet else None,
        log_completions=False,
        off_policy_mask_threshold=off_policy_threshold(config),
        **generation_arguments(config),
    )
    dropped = {"prompts_dropped_for_length": float(len(rows) - len(kept))}
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_function(scorer, config.mode, config.reward_clip)],  # type: ignore[list-item]
        args=args,
        train_dataset=Dataset.from_list(kept),
        processing_class=tokenizer,
        callbacks=[EventCallback("policy", dropped, config=config)],
        environment_factory=CrucibleEnv if agent and fleet is None else None,
        rollout_func=fleet,
        peft_config=peft_config(config, model, "CAUSAL_LM"),
    )
    finish_setup(trainer)
    log(
        f"grpo ({config.mode}{', episodes on the fleet' if fleet else ''}, generation: {config.generation}): "
        f"{len(kept)} prompts, "
        f"{config.num_generations} generations each, "
        f"at most {config.max_new_tokens} new tokens"
    )
    try:
        # Its loss is no measure of learning (its evaluation would sample and score): its reward curve is.
        run_training(trainer, config, held_in=False)
    finally:
        CrucibleEnv.close_all()
        if fleet is not None:
            fleet.close()
