"""The trainers a training run's subprocess executes: SFT, reward model, DPO and GRPO on TRL.

Plain Python (no Django, no database): `accelerate launch -m training.trainers RUN_DIR` on any
host with the model and the data file. See `__main__` for the process contract.
"""
