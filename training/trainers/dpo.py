"""DPO on the same preference export as the reward model; the reference model is the base.

rl.kl_coef is DPO's beta: how far the policy may move from the reference per unit of preference.
"""

from __future__ import annotations

from datasets import Dataset

from training.trainers.common import (
    TrainerConfig,
    TrainerError,
    finish_setup,
    load_tokenizer,
    log,
    peft_config,
    quantized,
    run_training,
    torch_dtype,
    training_arguments,
)
from training.trainers.events import EventCallback
from training.trainers.lengths import fit_max_length, model_context
from training.trainers.preferences import pair_lengths, preference_rows


def train(config: TrainerConfig) -> None:
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer

    rows = preference_rows(config.train_file)
    tokenizer = load_tokenizer(config.base_model)
    # keep_start: a longer pair loses its end, where the submitted patch (what was judged) is.
    fit = fit_max_length(config.max_length, pair_lengths(tokenizer, rows), model_context(config.base_model), cuts=True)
    log(f"dpo: max_length {fit.max_length} ({'given' if config.max_length else 'the longest pair'})")
    model = AutoModelForCausalLM.from_pretrained(str(config.base_model), dtype=torch_dtype(config), **quantized(config))
    args = DPOConfig(
        **training_arguments(config),
        max_length=fit.max_length,
        beta=config.kl_coef or 0.1,
    )
    callback = EventCallback("policy", {"truncated_for_length": float(fit.longer)}, config=config)
    if fit.longer:
        log(f"dpo: {fit.longer} of {len(rows)} pairs are cut at {fit.max_length} tokens (the model's context)")
    trainer = DPOTrainer(
        model=model,
        # TRL loads the base again, frozen, as the reference; with model.lora the reference is the model
        # with its adapters switched off (no second copy).
        ref_model=None,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[callback],
        peft_config=peft_config(config, model, "CAUSAL_LM"),
    )
    finish_setup(trainer)
    if not len(trainer.train_dataset):  # type: ignore[arg-type]  # a Dataset here, not a stream
        raise TrainerError(
            f"every one of the {len(rows)} pairs has a prompt that fills rl.max_length ({fit.max_length}): "
            "raise it, or leave it out to use the longest pair"
        )
    run_training(trainer, config)
