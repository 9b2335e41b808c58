"""Policies: what decides an agent's next action (hf, openai, scripted, replay)."""
