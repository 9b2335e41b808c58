"""The deployment files say what the code reads: no variable nobody reads, no queue that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from core.vocabulary import JobQueue, values

REPO = Path(__file__).resolve().parent.parent.parent
# Read by boto3 itself (the S3 client), not by Crucible's settings.
BOTO3_VARIABLES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}


def test_the_compose_file_sets_only_variables_the_settings_read_and_real_queues() -> None:
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    settings_source = (REPO / "webapp" / "settings.py").read_text()
    crucible = [s for s in compose["services"].values() if s.get("image") == "crucible:latest"]
    assert {"web", "cpu-worker", "gpu-worker", "migrate"} <= set(compose["services"]) and len(crucible) == 4
    served: set[str] = set()
    for service in crucible:
        for name in service["environment"]:
            assert name in BOTO3_VARIABLES or f'"{name}"' in settings_source, name
        command = service.get("command", [])
        if "-Q" in command:
            served |= set(command[command.index("-Q") + 1].split(","))
    assert served == set(values(JobQueue))  # every queue, and only real ones, has a worker class


def test_the_deploy_guide_names_every_setting_the_compose_file_uses() -> None:
    guide = (REPO / "docs" / "deploy.md").read_text()
    compose = (REPO / "deploy" / "compose.yaml").read_text()
    postgres_image = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}
    for name in set(re.findall(r"^\s+([A-Z][A-Z0-9_]+):", compose, re.M)) - postgres_image:
        assert name in guide, name
