"""DPO on the same preference export as the reward model; the reference model is the base.

rl.kl_coef is DPO's beta: how far the policy may move from the reference per unit of preference.
"""

from __future__ import annotations

from datasets import Dataset

from training.trainers.common import (
    EventCallback,
    TrainerConfig,
    finish_setup,
    load_tokenizer,
    torch_dtype,
    training_arguments,
)
from training.trainers.preferences import preference_rows


def train(config: TrainerConfig) -> None:
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer

    rows = preference_rows(config.train_file)
    tokenizer = load_tokenizer(config.base_model)
    model = AutoModelForCausalLM.from_pretrained(str(config.base_model), dtype=torch_dtype(config))
    args = DPOConfig(
        **training_arguments(config),
        max_length=config.max_length,
        beta=config.kl_coef or 0.1,
    )
    trainer = DPOTrainer(
        model=model,
        ref_model=None,  # TRL loads the base again, frozen, as the reference
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[EventCallback("policy")],
    )
    finish_setup(trainer)
    trainer.train()
