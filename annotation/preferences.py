"""People's pairwise verdicts as a TRL preference dataset, with lineage, in constant memory.

Format: TRL's *conversational preference with an explicit prompt* — the one both
RewardTrainer and DPOTrainer accept for chat data (RewardTrainer prepends `prompt` to each
side and applies the chat template; DPOTrainer splits prompt and completions itself):

    prompt   : the system prompt and the task statement, as the policy saw them
               (trajectories.conversation.prompt_messages)
    chosen   : the preferred trajectory's turns after the prompt: assistant tool calls and
               tool observations, exactly as trajectories.conversation renders them
    rejected : the other trajectory's turns
    tools    : the tool schemas as a JSON string; TRL passes them to the chat template, so
               the tokenised text is the chat the policy was spoken to in
    margin   : optional, the share of reviewers who chose the verdict (RewardTrainer
               subtracts it in its loss: a unanimous pair asks for a wider reward gap)

Plus lineage: pair id, set, task id and version, both trajectory ids, reviewers, their
choices and reasons, the resolution note. A pair is exported when people reached a verdict:
a researcher's resolution, or a strict majority of a complete set of judgements. Tie and
both-bad verdicts say neither side should be preferred; they are left out unless asked for,
and then exported A-as-chosen with `verdict` telling the reader what they are.

With `sides=PairSides.PATCH` each side is that patch alone (a row as long as the two patches, where
a pair of 30-step trajectories is thousands of tokens a side and a trainer's step takes minutes).

Each side ends with the patch its trajectory submitted, as one last assistant turn
(trajectories.conversation.judged_conversation): the patch is what people judged, and two
trajectories whose steps read alike differ in it alone. A pair whose sides still render the
same prefers a text to itself: it is refused, and counted in the caller's `refused`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

from annotation.agreement_report import verdict
from annotation.models import Comparison, ComparisonSet, Judgement
from core.vocabulary import ComparisonChoice, PairSides
from trajectories.conversation import TOOLS, RecordedStep, pair_side, prompt_messages
from trajectories.models import Step

# Pairs per database round trip; both sides' steps of a chunk are in memory at once.
CHUNK_PAIRS = 50
# Rows per Parquet row group (the export layer, webapp.export_kinds, reads it when an export starts).
PARQUET_ROWS = 256
# Key order kept: the chat template renders the schemas with tojson, so sorted keys would be
# another text than the one the policy was shown.
TOOLS_JSON = json.dumps(TOOLS)
DECISIVE = (ComparisonChoice.A.value, ComparisonChoice.B.value)
IDENTICAL_PAIRS = "identical_pairs"  # the key of `refused` that counts pairs whose sides render the same


def iter_preference_rows(
    comparison_set: ComparisonSet,
    *,
    keep_ties: bool = False,
    margin: bool = True,
    refused: Counter[str] | None = None,
    sides: PairSides = PairSides.TURNS,
) -> Iterator[dict[str, Any]]:
    """One row per pair with a verdict, in the set's serving order, walked by primary key; pairs
    whose sides render the same are counted in `refused` (IDENTICAL_PAIRS) instead."""
    refused = refused if refused is not None else Counter()
    base = Comparison.objects.filter(comparison_set=comparison_set).select_related(
        "task", "trajectory_a", "trajectory_b"
    )
    last = 0
    while True:
        chunk = list(base.filter(id__gt=last).order_by("id")[:CHUNK_PAIRS])
        if not chunk:
            return
        last = chunk[-1].id
        votes = _votes([c.id for c in chunk])
        steps = _steps([pk for c in chunk for pk in (c.trajectory_a_id, c.trajectory_b_id)])
        for comparison in chunk:
            comparison.comparison_set = comparison_set  # one set: no query per pair for its name and k
            row = _row(comparison, votes.get(comparison.id, []), steps, keep_ties=keep_ties, margin=margin, sides=sides)
            if row is None:
                continue
            if row["chosen"] == row["rejected"]:
                refused[IDENTICAL_PAIRS] += 1
                continue
            yield row


def _votes(comparison_ids: list[int]) -> dict[int, list[tuple[str, str, str]]]:
    out: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    rows = (
        Judgement.objects.filter(comparison_id__in=comparison_ids)
        .order_by("created_at", "id")
        .values_list("comparison_id", "reviewer__username", "choice", "reason")
    )
    for pair, reviewer, choice, reason in rows:
        out[pair].append((reviewer, choice, reason))
    return out


def _steps(trajectory_pks: list[int]) -> dict[int, list[RecordedStep]]:
    out: dict[int, list[RecordedStep]] = defaultdict(list)
    rows = (
        Step.objects.filter(trajectory_id__in=trajectory_pks)
        .order_by("trajectory_id", "step")
        .values_list("trajectory_id", "action_type", "action_input", "thought", "observation")
    )
    for pk, action_type, action_input, thought, observation in rows.iterator(chunk_size=2000):
        out[pk].append(RecordedStep(action_type, action_input, thought or "", observation or ""))
    return out


def _row(
    comparison: Comparison,
    votes: list[tuple[str, str, str]],
    steps: dict[int, list[RecordedStep]],
    *,
    keep_ties: bool,
    margin: bool,
    sides: PairSides,
) -> dict[str, Any] | None:
    complete = len(votes) >= comparison.comparison_set.reviewers_per_pair
    if not comparison.resolution and not complete:
        return None  # still in the queue: a majority of the judgements so far is not the people's verdict
    choices = [choice for _, choice, _ in votes]
    found = verdict(choices, comparison.resolution)
    if found is None or (found not in DECISIVE and not keep_ties):
        return None
    a, b = comparison.trajectory_a, comparison.trajectory_b
    chosen, rejected = (b, a) if found == ComparisonChoice.B else (a, b)
    statement = comparison.task.statement if comparison.task is not None else a.prompt
    language = comparison.task.language if comparison.task is not None else a.language
    row: dict[str, Any] = {
        "prompt": prompt_messages(statement, language),
        "chosen": pair_side(statement, steps.get(chosen.pk, []), chosen.patch, sides, language),
        "rejected": pair_side(statement, steps.get(rejected.pk, []), rejected.patch, sides, language),
        "tools": TOOLS_JSON,
    }
    if margin:
        row["margin"] = choices.count(found) / len(choices) if choices else 1.0
    row |= {
        "verdict": found,
        "pair_id": comparison.id,
        "set": comparison.comparison_set.name,
        "task_id": comparison.task_ref,
        "task_version": a.task_version or (comparison.task.version if comparison.task is not None else ""),
        "chosen_trajectory_id": str(chosen.trajectory_id),
        "rejected_trajectory_id": str(rejected.trajectory_id),
        "reviewers": [reviewer for reviewer, _, _ in votes],
        "choices": choices,
        "reasons": [reason for _, _, reason in votes],
        "resolution_note": comparison.resolution_note,
    }
    return row


def parquet_schema(margin: bool = True) -> Any:
    """Explicit, so every row group has the same types whatever keys its messages happen to use."""
    import pyarrow as pa

    call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.list_(
        pa.struct(
            [
                ("role", pa.string()),
                ("content", pa.string()),
                ("tool_calls", pa.list_(call)),
                ("tool_call_id", pa.string()),
                ("name", pa.string()),
            ]
        )
    )
    text_list = pa.list_(pa.string())
    fields = [("prompt", message), ("chosen", message), ("rejected", message), ("tools", pa.string())]
    if margin:
        fields.append(("margin", pa.float64()))
    fields += [
        ("verdict", pa.string()),
        ("pair_id", pa.int64()),
        ("set", pa.string()),
        ("task_id", pa.string()),
        ("task_version", pa.string()),
        ("chosen_trajectory_id", pa.string()),
        ("rejected_trajectory_id", pa.string()),
        ("reviewers", text_list),
        ("choices", text_list),
        ("reasons", text_list),
        ("resolution_note", pa.string()),
    ]
    return pa.schema(fields)
