"""Trajectories in other harnesses' formats: SWE-agent, mini-swe-agent and OpenHands in;
SWE-bench predictions and token-level episodes out (trajectories.interchange.episodes)."""
