"""A reward model from people's preferences: TRL's RewardTrainer on a preference export.

The checkpoint is a sequence classifier with one output (`num_labels=1`): the score a reward
spec can weigh in as one component. Pairs longer than rl.max_length are dropped by TRL and
reported as the `dropped_for_length` metric, so a researcher sees how much of the data trained.
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
    from transformers import AutoModelForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    rows = preference_rows(config.train_file)
    tokenizer = load_tokenizer(config.base_model)
    # TRL drops a pair longer than max_length (nothing is cut), so a given value is kept and what it drops counted.
    lengths = pair_lengths(tokenizer, rows)
    fit = fit_max_length(config.max_length, lengths, model_context(config.base_model), cuts=False)
    log(f"reward: max_length {fit.max_length} ({'given' if config.max_length else 'the longest pair'})")
    model = AutoModelForSequenceClassification.from_pretrained(
        str(config.base_model), num_labels=1, dtype=torch_dtype(config), **quantized(config)
    )
    # Batches of pairs are padded; the classifier finds each sequence's last token by the pad id.
    model.config.pad_token_id = tokenizer.pad_token_id
    args = RewardConfig(**training_arguments(config), max_length=fit.max_length)
    callback = EventCallback("reward", config=config)
    trainer = RewardTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[callback],
        peft_config=peft_config(config, model, "SEQ_CLS"),
    )
    finish_setup(trainer)
    dropped = len(rows) - len(trainer.train_dataset)  # type: ignore[arg-type]  # a Dataset here, not a stream
    if dropped == len(rows):
        raise TrainerError(
            f"every one of the {len(rows)} pairs is longer than rl.max_length ({fit.max_length}): raise it to at "
            f"least {min(r.tokens for r in lengths)}, or leave it out to use the longest pair"
        )
    if dropped:
        log(f"reward: dropped {dropped} of {len(rows)} pairs longer than {fit.max_length} tokens")
    callback.add_values({"dropped_for_length": float(dropped), "pairs": float(len(rows) - dropped)})
    run_training(trainer, config)
