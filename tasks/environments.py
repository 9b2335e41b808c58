"""Verbs for repository environments: detect one for a task, build it, keep a record for the suite page."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import EnvBuildError, Environment, EnvSpec, ensure_environment
from tasks.builders.environment import detect_environment
from tasks.models import Task, TaskEnvironment

logger = logging.getLogger(__name__)

LOG_CHARS = 20_000


@dataclass
class Prepared:
    """An environment build's outcome: the environment, or why there is none."""

    spec: EnvSpec
    environment: Environment | None
    error: str = ""

    def label(self) -> str:
        return f"environment {self.spec.spec_hash()}"

    def line(self) -> str:
        if self.environment is None:
            return f"{self.label()} cannot be built: {self.error}"
        env = self.environment
        how = f"built in {env.build_seconds:.1f} s" if env.built_now else "reused from the cache"
        return f"{self.label()} ({env.key}): {len(env.lock)} packages, {env.size_bytes / 1e6:.1f} MB, {how}"


def prepare_environment(spec: EnvSpec, repo: str = "", *, rebuild: bool = False, allow_sdist: bool = False) -> Prepared:
    """Build (or find) the environment for `spec` and record the outcome; a failure is returned, not raised."""
    try:
        env = ensure_environment(spec, rebuild=rebuild, allow_sdist=allow_sdist)
    except (EnvBuildError, OSError) as exc:
        logger.warning("environment %s for %s cannot be built: %s", spec.spec_hash(), repo or "?", exc)
        record(spec, None, repo, str(exc))
        return Prepared(spec, None, str(exc))
    record(spec, env, repo)
    return Prepared(spec, env)


def record(spec: EnvSpec, env: Environment | None, repo: str = "", error: str = "") -> TaskEnvironment:
    values: dict[str, object] = {"spec": spec.to_json(), "built": env is not None, "error": error[:LOG_CHARS]}
    if repo:
        values["repo"] = repo[:200]
    if env is not None:
        values |= {
            "key": env.key,
            "lock": list(env.lock),
            "size_bytes": env.size_bytes,
            "build_seconds": env.build_seconds,
            "log": env.log()[-LOG_CHARS:],
        }
    row, _ = TaskEnvironment.objects.update_or_create(spec_hash=spec.spec_hash(), defaults=values)
    return row


def attach_environment(task_dir: Path, pytest: str = "", repo: str = "") -> Prepared | None:
    """Name the environment a built task directory's snapshot needs in its metadata.json, and build it.

    None when the bare runner is enough. A spec that cannot even be detected (the repository
    wants a Python this host lacks) is recorded in the metadata as the reason, so validation
    reports "environment cannot be built", not "tests don't fail".
    """
    meta_path = task_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    try:
        detected = detect_environment(task_dir / "repo_snapshot", pytest)
    except EnvBuildError as exc:
        meta["environment_error"] = str(exc)
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        return None
    if detected.spec is None:
        return None
    meta["environment"] = detected.spec.to_json()
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return prepare_environment(detected.spec, repo)


def environments_of(tasks: list[Task]) -> list[TaskEnvironment]:
    """The recorded environments the given tasks name, for a suite's page."""
    hashes = set()
    for task in tasks:
        data = (task.metadata or {}).get("environment")
        if data:
            try:
                hashes.add(EnvSpec.from_json(data).spec_hash())
            except EnvBuildError:
                continue
    return list(TaskEnvironment.objects.filter(spec_hash__in=hashes).order_by("-updated_at"))
