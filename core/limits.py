"""Limits that forms, services, the API and the CLI all check: defined once here."""

from __future__ import annotations

# Rollout batches.
SAMPLES_MIN, SAMPLES_MAX = 1, 64
MAX_STEPS_MIN, MAX_STEPS_MAX = 1, 200
MAX_STEPS_DEFAULT = 30
TEMPERATURE_MIN, TEMPERATURE_MAX = 0.0, 2.0
TEMPERATURE_DEFAULT = 0.8
MAX_NEW_TOKENS_MIN, MAX_NEW_TOKENS_MAX = 16, 4096
MAX_NEW_TOKENS_DEFAULT = 256
TOP_P_DEFAULT = 1.0

# Identifiers that come from files and agents.
TASK_ID_MAX = 200

# Live events carry a step's texts cut to this; the page fetches the rest on demand.
LIVE_TEXT_MAX = 20_000
# Subscriptions one WebSocket may hold.
LIVE_MAX_SUBSCRIPTIONS = 64
