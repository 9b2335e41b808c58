"""People's verdicts exported as a TRL preference dataset, loaded back with `datasets` and
prepared by TRL's RewardTrainer with the bundled model's tokenizer (no training, no weights)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotation import preferences
from annotation.models import Comparison, ComparisonSet
from annotation.preferences import iter_preference_rows
from tests.annotation.agreement_fixtures import Pair, make_set
from trajectories.conversation import TOOLS, prompt_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def cset() -> ComparisonSet:
    """k = 2. Exported by default: pairs 0 (A, unanimous), 1 (B, unanimous), 2 (split, resolved A).
    Ties and both-bad (3, 4) only when kept; pair 5 waits for its second reviewer."""
    return make_set(
        "prefs",
        [
            Pair({"ann": "A", "ben": "A"}, reasons={"ann": "A adds a test", "ben": "smaller"}),
            Pair({"ann": "B", "ben": "B"}),
            Pair({"ann": "A", "ben": "B"}, resolution="A"),
            Pair({"ann": "tie", "ben": "tie"}),
            Pair({"ann": "both_bad", "ben": "both_bad"}),
            Pair({"ann": "A"}),
        ],
    )


def export(cset: ComparisonSet, tmp_path: Path, fmt: str, *extra: str) -> Path:
    out = tmp_path / f"prefs.{fmt}"
    call_command("export", "preferences", "--set", cset.name, "--format", fmt, "--out", str(out), *extra, verbosity=0)
    return out


def test_rows_are_trl_conversational_preferences_with_lineage(cset: ComparisonSet) -> None:
    rows = list(iter_preference_rows(cset))
    assert [r["verdict"] for r in rows] == ["A", "B", "A"]
    assert [r["margin"] for r in rows] == [1.0, 1.0, 0.5]
    first, second, _ = rows
    pair = Comparison.objects.select_related("trajectory_a", "trajectory_b", "task").get(pk=second["pair_id"])
    assert second["prompt"] == prompt_messages(pair.task.statement)  # type: ignore[union-attr]
    assert [m["role"] for m in second["prompt"]] == ["system", "user"]
    # B won pair 1: chosen is B's conversation after the prompt, tool calls and observations,
    # then the patch B submitted (what the reviewers judged).
    assert second["chosen_trajectory_id"] == str(pair.trajectory_b.trajectory_id)
    assert second["rejected_trajectory_id"] == str(pair.trajectory_a.trajectory_id)
    assert [m["role"] for m in second["chosen"]] == ["assistant", "tool"] * 3 + ["assistant"]
    assert second["chosen"][-1]["content"] == "Submitted patch:\ndiff b1"
    assert second["rejected"][-1]["content"] == "Submitted patch:\ndiff a1"
    write = json.loads(second["chosen"][2]["tool_calls"][0]["function"]["arguments"])
    assert write == {"path": "src/app.py", "content": "x = b1\n"}
    assert json.loads(second["rejected"][2]["tool_calls"][0]["function"]["arguments"])["content"] == "x = a1\n"
    assert json.loads(second["tools"]) == json.loads(json.dumps(TOOLS))
    lineage = {k: v for k, v in first.items() if k not in ("prompt", "chosen", "rejected", "tools", "pair_id")}
    unanimous = Comparison.objects.select_related("trajectory_a", "trajectory_b").get(pk=first["pair_id"])
    assert lineage == {
        "margin": 1.0,
        "verdict": "A",
        "set": "prefs",
        "task_id": unanimous.task_ref,
        "task_version": "sha256:" + "2" * 64,  # the version both trajectories ran against
        "chosen_trajectory_id": str(unanimous.trajectory_a.trajectory_id),
        "rejected_trajectory_id": str(unanimous.trajectory_b.trajectory_id),
        "reviewers": ["ann", "ben"],
        "choices": ["A", "A"],
        "reasons": ["A adds a test", "smaller"],
        "resolution_note": "",
    }


def test_ties_and_both_bad_are_kept_only_when_asked_and_margin_can_be_left_out(cset: ComparisonSet) -> None:
    rows = list(iter_preference_rows(cset, keep_ties=True, margin=False))
    assert [r["verdict"] for r in rows] == ["A", "B", "A", "tie", "both_bad"]
    assert all("margin" not in r for r in rows)


def test_rows_come_in_chunks_with_a_bounded_number_of_queries(
    cset: ComparisonSet, monkeypatch: pytest.MonkeyPatch, django_assert_num_queries: Any
) -> None:
    whole = list(iter_preference_rows(cset, keep_ties=True))
    monkeypatch.setattr(preferences, "CHUNK_PAIRS", 2)
    # 6 pairs in chunks of 2: per chunk pairs, judgements and steps; then one empty read.
    with django_assert_num_queries(3 * 3 + 1):
        chunked = list(iter_preference_rows(cset, keep_ties=True))
    assert chunked == whole


def test_the_exports_load_with_datasets_and_pass_trls_reward_and_dpo_preparation(
    cset: ComparisonSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, RewardConfig
    from trl.trainer.dpo_trainer import DPOTrainer
    from trl.trainer.reward_trainer import DataCollatorForPreference, RewardTrainer

    monkeypatch.setattr(preferences, "PARQUET_ROWS", 2)  # more than one row group
    jsonl = export(cset, tmp_path, "jsonl")
    parquet = export(cset, tmp_path, "parquet")
    import pyarrow.parquet as pq

    assert pq.ParquetFile(parquet).metadata.num_row_groups == 2
    tokenizer = AutoTokenizer.from_pretrained(settings.CRUCIBLE_DEFAULT_MODEL)
    config: dict[str, Any] = {"output_dir": str(tmp_path / "out"), "max_length": None, "report_to": []}
    config |= {"use_cpu": True, "bf16": False}
    args = RewardConfig(**config)
    for kind, path in (("json", jsonl), ("parquet", parquet)):
        dataset = load_dataset(kind, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
        assert dataset.num_rows == 3
        assert {"prompt", "chosen", "rejected", "margin", "pair_id", "reviewers", "reasons"} <= set(
            dataset.column_names
        )
        # The preparation RewardTrainer.__init__ runs on its train dataset; it uses no trainer state.
        prepared = RewardTrainer._prepare_dataset(None, dataset, tokenizer, args, "train")  # type: ignore[arg-type]
        assert {"chosen_ids", "rejected_ids"} <= set(prepared.column_names)
        assert prepared.num_rows == 3
        text = tokenizer.decode(prepared[1]["chosen_ids"])
        assert "Fix bug 1." in text and '"name": "write_file"' in text and "x = b1" in text
        assert "<tools>" in text  # the tool schemas reached the chat template, as in the policy's chat
        assert "x = a1" in tokenizer.decode(prepared[1]["rejected_ids"])
        batch = DataCollatorForPreference(pad_token_id=tokenizer.pad_token_id)(
            [{k: prepared[i][k] for k in ("chosen_ids", "rejected_ids", "margin")} for i in range(3)]
        )
        assert batch["margin"].tolist() == [1.0, 1.0, 0.5]
        assert batch["input_ids"].shape[0] == 6  # chosen then rejected
    # DPOTrainer takes the same rows: it splits prompt from completions where their tokens diverge,
    # which with this chat template is exactly after the prompt and the assistant header.
    dpo = DPOTrainer._prepare_dataset(None, dataset, tokenizer, DPOConfig(**config), "train")  # type: ignore[arg-type]
    # The prompt as the hf policy renders it (trajectories.policies.hf): same messages, same tools.
    shown: Any = tokenizer.apply_chat_template(
        prompt_messages("Fix bug 1."), tools=list(TOOLS), add_generation_prompt=True, tokenize=True, return_dict=True
    )
    row: Any = dpo[1]
    assert row["prompt_ids"] == shown["input_ids"]
    assert str(tokenizer.decode(row["chosen_ids"])).startswith("<tool_call>")


def test_the_export_refuses_bad_input_and_leaves_no_file(cset: ComparisonSet, tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    with pytest.raises(CommandError, match="no comparison set named 'nope'"):
        call_command("export", "preferences", "--set", "nope", "--out", str(out), verbosity=0)
    with pytest.raises(CommandError, match="export preferences needs --set NAME"):
        call_command("export", "preferences", "--out", str(out), verbosity=0)
    with pytest.raises(CommandError, match="tasks export only as jsonl"):
        call_command("export", "tasks", "--format", "sft", "--out", str(out), verbosity=0)
    with pytest.raises(CommandError, match="--suite does not apply to a preferences export"):
        call_command("export", "preferences", "--set", cset.name, "--suite", "x", "--out", str(out), verbosity=0)
    with pytest.raises(CommandError, match="--keep-ties does not apply to a trajectories export"):
        call_command("export", "trajectories", "--keep-ties", "--out", str(out), verbosity=0)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_parquet_export_still_has_the_schema(tmp_path: Path) -> None:
    empty = make_set("nothing", [])
    path = export(empty, tmp_path, "parquet", "--no-margin")
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.num_rows == 0
    assert "chosen" in table.column_names and "margin" not in table.column_names
