"""The same SFTTrainer call as training.trainers.sft, made directly: no launcher, no accelerate,
no event callback. Used by bench/training_wrapper.py as the baseline."""

from __future__ import annotations

import sys
from pathlib import Path


def main(run_dir: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from training.trainers.common import read_config, read_jsonl, training_arguments
    from training.trainers.sft import sft_rows

    config = read_config(Path(run_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(config.base_model))
    model = AutoModelForCausalLM.from_pretrained(str(config.base_model))
    args = SFTConfig(
        **training_arguments(config),
        max_length=config.max_length,
        truncation_mode="keep_start",
        assistant_only_loss=True,
        packing=False,
    )
    rows = sft_rows(read_jsonl(config.train_file, ("messages",)))
    SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer).train()


if __name__ == "__main__":
    main(sys.argv[1])
