"""Every kind x format streams, loads in the tool it is for, and goes through redaction on its way out."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasets import load_from_disk
from django.conf import settings
from django.core.management import CommandError, call_command

from annotation.models import Comparison, ComparisonSet, Judgement
from core.models import AuditEvent
from tasks.models import Task, TaskSuite
from tests.factories import UserFactory
from training.models import TrainingSet
from trajectories.models import Step, Trajectory
from webapp import export_formats
from webapp.export_kinds import KINDS
from webapp.export_redaction import UNREDACTED_MARK, needs_redaction, redact_row

pytestmark = pytest.mark.django_db
# Shaped like an AWS access key id (not AWS's documented example, which redaction keeps).
PLANTED = "AKIA" + "Q7ZRXW4T2PLM9VBN"
# A private-key block and an internal host name ride along with it in a task and a trajectory.
KEY_BODY = "MIIEowIBAAKCAQEA7bq3kXv9" + "Qz4mNw2T8pLr5sY1uVcH0eJdFgKiOaBnPqRtSxUyZ"
KEY_BLOCK = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----"
HOST = "billing-db1.prod.corp"
SECRETS = {PLANTED: "aws_access_key", KEY_BODY: "private_key_block", HOST: "internal_host"}


def export(tmp_path: Path, kind: str, fmt: str, *extra: str) -> Path:
    out = tmp_path / f"{kind}.{fmt}"
    call_command("export", kind, "--format", fmt, "--out", str(out), *extra, verbosity=0)
    return out


def rows_of(path: Path, fmt: str) -> list[dict[str, Any]]:
    """What a consumer of the format reads back."""
    if fmt == "parquet":
        return pq.read_table(path).to_pylist()  # type: ignore[no-any-return]
    if fmt == "hf":
        return list(load_from_disk(str(path)))
    if fmt in ("taskdir", "harbor"):
        with tarfile.open(path) as archive:
            return [
                {"name": m.name, "text": archive.extractfile(m).read().decode("utf-8", "replace")}  # type: ignore[union-attr]
                for m in archive.getmembers()
            ]
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def planted(demo_suite: TaskSuite) -> dict[str, str]:
    """A secret in every kind's data, written past the import's redaction (data from before a rule existed)."""
    step = Step.objects.filter(trajectory__task_ref="task_0001").order_by("trajectory_id", "step").first()
    assert step is not None
    Step.objects.filter(pk=step.pk).update(
        observation=f"AWS_ACCESS_KEY_ID={PLANTED}\n{KEY_BLOCK}\nconnecting to {HOST}:5432"
    )
    # Imported under rules older than today's: an export scans it again.
    Trajectory.objects.update(redacted_with="rules-of-last-year")
    Task.objects.filter(task_id="task_0001").update(
        statement=f"Fix it. Our key {PLANTED} leaked, with this one:\n{KEY_BLOCK}\nfrom {HOST}."
    )
    members = [str(t) for t in Trajectory.objects.values_list("trajectory_id", flat=True)]
    TrainingSet.objects.create(name="all", version=1, trajectory_ids=members)
    cset = ComparisonSet.objects.create(name="prefs", suite=demo_suite, strategy="random", reviewers_per_pair=1)
    ann = UserFactory.create(username="ann", role="reviewer")
    trajectories = list(Trajectory.objects.order_by("id"))
    for position, (a, b) in enumerate([(trajectories[0], trajectories[1]), (trajectories[2], trajectories[3])]):
        pair = Comparison.objects.create(
            comparison_set=cset,
            task=a.task,
            task_ref=a.task_ref,
            trajectory_a=a,
            trajectory_b=b,
            pair_key=f"{a.trajectory_id}:{b.trajectory_id}",
            position=position,
            judgement_count=1,
        )
        Judgement.objects.create(comparison=pair, reviewer=ann, choice="A", reason=f"B leaks {PLANTED}")
    return {"preferences": "prefs", "training-set": "all"}


def test_every_kind_and_format_is_redacted_loads_back_and_is_audited(
    planted: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_formats, "ROW_GROUP_ROWS", 3)  # several row groups
    monkeypatch.setattr(export_formats, "SHARD_ROWS", 3)  # several Hugging Face shards
    tokenizer = ["--tokenizer", settings.CRUCIBLE_DEFAULT_MODEL]
    expected = {"trajectories": 7, "tasks": 17, "preferences": 2, "training-set": 7}
    for kind, spec in KINDS.items():
        for fmt in spec.formats:
            extra = ["--set", planted[kind]] if kind in planted else []
            rows = rows_of(export(tmp_path, kind, fmt, *extra, *(tokenizer if fmt == "episodes" else [])), fmt)
            text = json.dumps(rows)
            for secret in SECRETS:
                assert secret not in text, (kind, fmt, SECRETS[secret])
            if fmt not in ("episodes", "swe-bench-predictions", "taskdir", "harbor"):
                assert "[REDACTED:aws_access_key]" in text, (kind, fmt)
            if kind in ("trajectories", "tasks") and fmt not in (
                "episodes",
                "swe-bench-predictions",
                "taskdir",
                "harbor",
            ):
                for rule in SECRETS.values():
                    assert f"[REDACTED:{rule}]" in text, (kind, fmt, rule)
            if fmt not in ("taskdir", "harbor"):
                assert len(rows) == expected[kind], (kind, fmt)
            event = AuditEvent.objects.filter(action="export").latest("id")
            assert event.detail["format"] == fmt and event.detail["redacted"] is True
            assert event.detail["count"] == expected[kind] and event.detail["complete"] is True
            if kind in ("trajectories", "tasks") and fmt in ("jsonl", "parquet"):
                # The audit record lists what was redacted, by rule and field, never the text.
                assert set(SECRETS.values()) <= set(event.detail["rules"]), (kind, fmt, event.detail)
                redactions = AuditEvent.objects.filter(action="redact", detail__export_format=fmt, id__gt=event.id)
                assert set(SECRETS.values()) <= {e.detail["rule"] for e in redactions}, (kind, fmt)
                assert not any(secret in json.dumps(e.detail) for e in redactions for secret in SECRETS)
    assert AuditEvent.objects.filter(action="export").count() == sum(len(s.formats) for s in KINDS.values())


@pytest.mark.parametrize(
    "value",
    [
        f"line one\n{PLANTED}",  # after an escape in the JSON text
        "token:\tsk-" + "a1B2c3D4e5F6g7H8i9J0k",  # a word-start rule after a tab
        'say "Bearer abcdefghijklmnop0123"',
        "mail ann@corp.acme-bank.com\\",
    ],
)
def test_the_one_scan_per_record_sees_every_secret_the_field_by_field_pass_sees(value: str) -> None:
    record = {"steps": [{"observation": value, "action_input": {"command": value}}], "patch": ""}
    assert redact_row(record, "trajectory")[1], value
    assert needs_redaction(record), value


def test_an_unredacted_export_keeps_the_data_and_says_so(planted: dict[str, str], tmp_path: Path) -> None:
    rows = rows_of(export(tmp_path, "trajectories", "jsonl", "--unredacted"), "jsonl")
    assert rows[0][UNREDACTED_MARK] is True and all(UNREDACTED_MARK not in row for row in rows[1:])
    assert PLANTED in json.dumps(rows)
    parquet = export(tmp_path, "tasks", "parquet", "--unredacted")
    assert pq.read_schema(parquet).metadata[b"crucible.redacted"] == b"false"
    assert AuditEvent.objects.filter(action="export", detail__redacted=False).count() == 2


def test_the_formats_carry_what_their_readers_need(planted: dict[str, str], tmp_path: Path) -> None:
    trajectories = rows_of(export(tmp_path, "trajectories", "hf"), "hf")
    first = Trajectory.objects.order_by("id").first()
    assert first is not None and trajectories[0]["trajectory_id"] == str(first.trajectory_id)
    assert len(trajectories[0]["steps"]) == first.step_count
    assert isinstance(json.loads(trajectories[0]["policy"]), dict)

    predictions = rows_of(export(tmp_path, "trajectories", "swe-bench-predictions", "--model-name", "m1"), "jsonl")
    assert {"instance_id", "model_name_or_path", "model_patch"} <= set(predictions[0])
    assert predictions[0]["model_name_or_path"] == "m1" and predictions[0]["model_patch"] == first.patch

    sft = rows_of(export(tmp_path, "training-set", "sft", "--set", "all"), "jsonl")
    roles = [m["role"] for m in sft[0]["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles
    assert sft[0]["messages"][2]["tool_calls"][0]["function"]["name"] and sft[0]["tools"][0]["type"] == "function"

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(settings.CRUCIBLE_DEFAULT_MODEL)
    out = export(tmp_path, "trajectories", "episodes", "--tokenizer", settings.CRUCIBLE_DEFAULT_MODEL)
    episode = rows_of(out, "jsonl")[0]
    assert len(episode["response_ids"]) == len(episode["loss_mask"]) and set(episode["loss_mask"]) == {0, 1}
    prompt = str(tokenizer.decode(episode["prompt_ids"]))
    assert prompt.endswith("<|im_start|>assistant\n")
    mine = [t for t, m in zip(episode["response_ids"], episode["loss_mask"], strict=True) if m]
    learned = str(tokenizer.decode(mine))
    assert "<tool_call>" in learned or '"name"' in learned
    assert "<|im_start|>tool" not in learned  # observations are never learned from


def test_a_bad_request_is_one_line_and_writes_nothing(planted: dict[str, str], tmp_path: Path) -> None:
    for args, message in (
        (["trajectories", "--format", "episodes"], "needs a tokenizer"),
        (["trajectories", "--format", "episodes", "--tokenizer", str(tmp_path)], "cannot load a tokenizer"),
        (["tasks", "--format", "sft"], "tasks export only as"),
        (["tasks", "--tokenizer", "x"], "--tokenizer does not apply to a tasks export"),
        (["training-set", "--format", "hf"], "export training-set needs --set NAME"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("export", *args, "--out", str(tmp_path / "x"), verbosity=0)
    assert list(tmp_path.iterdir()) == []
