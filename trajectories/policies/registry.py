"""Policies by kind: the one place that says how each kind of policy is built.

Plain Python (no Django), Baserow's registry pattern: a kind, a factory, registered once.
A new kind of policy (a training checkpoint served some other way, say) registers its
factory here or from its app's `AppConfig.ready()`; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.env import ImproperlyConfiguredEnv, envchoice
from core.vocabulary import PolicyKind
from trajectories.policies.base import Policy, PolicyError
from trajectories.policies.hf import HFPolicy, NumberFormat, model_path_error
from trajectories.policies.openai import OpenAIPolicy, server_error
from trajectories.policies.scripted import ScriptedPolicy


@dataclass(frozen=True, kw_only=True)
class PolicySettings:
    """What a policy is built from: its batch's settings, for one task and one sample."""

    model: str
    base_url: str = ""
    temperature: float
    top_p: float
    seed: int
    max_new_tokens: int
    base_dir: Path  # the task's base snapshot
    expected_patch: str = ""  # the oracle's answer


PolicyFactory = Callable[[PolicySettings], Policy]
# Why a policy of this kind could not start with this model (and server), found cheaply before a
# batch is queued; None when it looks fine.
Preflight = Callable[[str, str, float], str | None]


@dataclass(frozen=True)
class ModelSource:
    """Where a model path this host lacks can come from (training registers its checkpoint store).

    `fetch(model)` returns a local directory for it, or None when it is not this source's;
    `known(model)` says cheaply, without fetching, whether `fetch` would find it.
    """

    fetch: Callable[[str], str | None]
    known: Callable[[str], bool]


class PolicyRegistry:
    def __init__(self) -> None:
        self._factories: dict[str, PolicyFactory] = {}
        self._preflights: dict[str, Preflight] = {}
        self._model_sources: list[ModelSource] = []

    def register(self, kind: PolicyKind, factory: PolicyFactory, preflight: Preflight | None = None) -> None:
        if kind in self._factories:
            raise ValueError(f"policy kind {kind!r} is registered twice")
        self._factories[kind] = factory
        if preflight is not None:
            self._preflights[kind] = preflight

    def preflight(self, kind: str, model: str, *, base_url: str = "", timeout: float = 3.0) -> str | None:
        """Why `kind` could not start with this model or server (checked from here, quickly), or None."""
        check = self._preflights.get(kind)
        return check(model, base_url, timeout) if check is not None else None

    def add_model_source(self, source: ModelSource) -> None:
        self._model_sources.append(source)

    def local_model(self, model: str) -> str:
        """`model` as a directory on this host: fetched by a model source when one holds it."""
        for source in self._model_sources:
            found = source.fetch(model)
            if found is not None:
                return found
        return model

    def model_known(self, model: str) -> bool:
        return any(source.known(model) for source in self._model_sources)

    def kinds(self) -> list[str]:
        return list(self._factories)

    def build(self, kind: str, settings: PolicySettings) -> Policy:
        try:
            factory = self._factories[kind]
        except KeyError:
            raise PolicyError(f"unknown policy {kind!r} (known: {', '.join(self._factories)})") from None
        return factory(settings)


def _scripted(settings: PolicySettings) -> Policy:
    return ScriptedPolicy(settings.base_dir, settings.expected_patch)


def _hf(settings: PolicySettings) -> Policy:
    return HFPolicy(
        # A checkpoint saved on another host (a GPU host's path) is fetched here first.
        policy_registry.local_model(settings.model),
        temperature=settings.temperature,
        top_p=settings.top_p,
        seed=settings.seed,
        max_new_tokens=settings.max_new_tokens,
        dtype=hf_number_format(),
    )


def hf_number_format() -> NumberFormat:
    """CRUCIBLE_HF_DTYPE, the number format every hf policy of this process uses (default auto)."""
    return NumberFormat(envchoice("CRUCIBLE_HF_DTYPE", NumberFormat.AUTO, tuple(NumberFormat)))


def _openai(settings: PolicySettings) -> Policy:
    return OpenAIPolicy(
        settings.base_url,
        settings.model,
        temperature=settings.temperature,
        top_p=settings.top_p,
        seed=settings.seed,
        max_tokens=settings.max_new_tokens,
    )


policy_registry = PolicyRegistry()
policy_registry.register(PolicyKind.SCRIPTED, _scripted)


def _hf_preflight(model: str, _url: str, _timeout: float) -> str | None:
    try:
        hf_number_format()  # a typo in it would fail every trajectory of the batch
    except ImproperlyConfiguredEnv as exc:
        return str(exc)
    problem = model_path_error(model)
    return None if problem is not None and policy_registry.model_known(model) else problem


policy_registry.register(PolicyKind.HF, _hf, _hf_preflight)
policy_registry.register(PolicyKind.OPENAI, _openai, lambda model, url, timeout: server_error(url, model, timeout))
