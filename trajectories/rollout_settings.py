"""How a batch samples: the one value that carries a rollout's settings.

The batch page's form, the REST launch, the `rollout` and `evaluate` commands, evaluation runs
and the runner all describe the same ten settings; each builds a `RolloutSettings`, which checks
its ranges once, on construction, so a value that exists is one a batch may be created from.
Whether the policy's server answers (the network) is asked separately, by `check_source`, just
before anything is queued.
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings as django_settings

from core.limits import (
    MAX_NEW_TOKENS_DEFAULT,
    MAX_NEW_TOKENS_MAX,
    MAX_NEW_TOKENS_MIN,
    MAX_STEPS_DEFAULT,
    MAX_STEPS_MAX,
    MAX_STEPS_MIN,
    SAMPLES_MAX,
    SAMPLES_MIN,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_MAX,
    TEMPERATURE_MIN,
    TOP_P_DEFAULT,
)
from core.vocabulary import DEFAULT_BACKEND, ISOLATING_BACKENDS, LAUNCHABLE_POLICIES, PolicyKind

if TYPE_CHECKING:
    from trajectories.models import RolloutBatch

RANGES = (
    f"samples {SAMPLES_MIN}-{SAMPLES_MAX}, max steps {MAX_STEPS_MIN}-{MAX_STEPS_MAX}, "
    f"temperature {TEMPERATURE_MIN:g}-{TEMPERATURE_MAX:g}, top_p in (0, 1], "
    f"max new tokens {MAX_NEW_TOKENS_MIN}-{MAX_NEW_TOKENS_MAX}"
)


class RolloutError(ValueError):
    pass


@dataclass(frozen=True)
class RolloutSettings:
    """A policy and how it samples: what a `RolloutBatch` row stores, field for field."""

    policy_kind: str
    model: str = ""  # a model directory (hf), a model name (openai); "" is the kind's default
    _: KW_ONLY
    base_url: str = ""  # the OpenAI-compatible server (openai)
    samples: int = 1  # rollouts per task
    temperature: float = TEMPERATURE_DEFAULT
    top_p: float = TOP_P_DEFAULT
    max_steps: int = MAX_STEPS_DEFAULT  # agent turns before the episode ends unfinished
    max_new_tokens: int = MAX_NEW_TOKENS_DEFAULT  # per model turn
    sandbox: str = DEFAULT_BACKEND  # where the agent's commands run: an isolating backend
    seed: int = 0

    def __post_init__(self) -> None:
        if self.policy_kind not in LAUNCHABLE_POLICIES:
            raise RolloutError(f"policy must be one of {', '.join(LAUNCHABLE_POLICIES)}")
        numbers = (self.samples, self.max_steps, self.max_new_tokens, self.temperature, self.top_p, self.seed)
        if any(isinstance(n, bool) or not isinstance(n, (int, float)) for n in numbers):
            raise RolloutError(f"settings must be numbers: {RANGES}")
        if not (
            SAMPLES_MIN <= self.samples <= SAMPLES_MAX
            and MAX_STEPS_MIN <= self.max_steps <= MAX_STEPS_MAX
            and TEMPERATURE_MIN <= self.temperature <= TEMPERATURE_MAX
            and 0 < self.top_p <= 1
            and MAX_NEW_TOKENS_MIN <= self.max_new_tokens <= MAX_NEW_TOKENS_MAX
        ):
            raise RolloutError(RANGES)
        if self.sandbox not in ISOLATING_BACKENDS:
            raise RolloutError(f"sandbox must be {' or '.join(ISOLATING_BACKENDS)}")
        if len(self.model) > 300 or len(self.base_url) > 300:
            raise RolloutError("model and base URL are at most 300 characters")

    def replace(self, **changes: Any) -> RolloutSettings:
        return dataclasses.replace(self, **changes)

    def resolved(self) -> RolloutSettings:
        """With the kind's default model filled in (what the batch row records)."""
        return self if self.model else self.replace(model=default_model(self.policy_kind))

    def fields(self) -> dict[str, Any]:
        """The `RolloutBatch` columns these settings fill."""
        return {name: getattr(self, name) for name in _NAMES}

    @classmethod
    def of_batch(cls, batch: RolloutBatch) -> RolloutSettings:
        return cls(**{name: getattr(batch, name) for name in _NAMES})

    @classmethod
    def from_options(cls, options: dict[str, Any], **overrides: Any) -> RolloutSettings:
        """From a command's parsed options (trajectories.options) or a form's cleaned data, where
        the policy is `policy`; a setting the source lacks keeps its default."""
        given = {"policy_kind": options.get("policy") or "", **{k: options[k] for k in _NAMES if k in options}}
        given = {k: v for k, v in {**given, **overrides}.items() if v is not None}
        given["model"], given["base_url"] = given.get("model") or "", given.get("base_url") or ""
        return cls(**given)


_NAMES = tuple(f.name for f in dataclasses.fields(RolloutSettings))  # KW_ONLY is no field


def default_model(policy_kind: str) -> str:
    if policy_kind == PolicyKind.SCRIPTED:
        return "oracle"
    if policy_kind == PolicyKind.HF:
        return str(django_settings.CRUCIBLE_DEFAULT_MODEL)
    return ""
