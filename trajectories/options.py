"""The command-line options every command that samples rollouts takes (`rollout`, `evaluate`), declared
once: the same names, defaults and help wherever a suite is rolled out from a shell."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from core.limits import MAX_STEPS_DEFAULT, TEMPERATURE_DEFAULT
from core.vocabulary import DEFAULT_BACKEND, ISOLATING_BACKENDS, LAUNCHABLE_POLICIES, values
from tasks.models import TaskSuite

# How long a command waits for the reward service to score what it sampled.
SCORE_TIMEOUT_DEFAULT = 900.0


def add_rollout_arguments(parser: argparse.ArgumentParser, *, policy_required: bool) -> None:
    """--suite, --policy, --model, --base-url, --temperature, --max-steps, --seed, --sandbox, --score-timeout."""
    parser.add_argument("--suite", required=True)
    parser.add_argument("--policy", required=policy_required, choices=values(LAUNCHABLE_POLICIES), default=None)
    parser.add_argument("--model", default="", help="model dir (hf) or model name (openai)")
    parser.add_argument("--base-url", default="", help="OpenAI-compatible server (openai policy)")
    parser.add_argument("--temperature", type=float, default=TEMPERATURE_DEFAULT)
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS_DEFAULT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sandbox", choices=values(ISOLATING_BACKENDS), default=DEFAULT_BACKEND.value)
    parser.add_argument(
        "--score-timeout",
        type=float,
        default=SCORE_TIMEOUT_DEFAULT,
        help="seconds to wait for the reward service to score what was sampled",
    )


def checked_suite(options: dict[str, Any]) -> TaskSuite:
    """The suite the options name, once the options that need no database are checked."""
    if not options["score_timeout"] > 0:
        raise CommandError("--score-timeout must be a positive number of seconds")
    suite = TaskSuite.objects.filter(name=options["suite"]).first()
    if suite is None:
        raise CommandError(f"no suite named {options['suite']!r}")
    return suite
