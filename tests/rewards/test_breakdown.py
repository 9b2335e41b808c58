"""The breakdown a score carries has exactly the keys rewards.breakdown declares, at every level."""

from __future__ import annotations

from typing import Any, get_type_hints

from rewards.breakdown import Breakdown, ExpectationsPart, FilesPart, HeldOutPart, ProbesPart
from rewards.scoring import score_patch
from rewards.spec import load_spec
from tests.rewards.corpus import HONEST, make_patch, task_spec

SPEC = load_spec()
PARTS: dict[str, Any] = {"files": FilesPart, "probes": ProbesPart, "expectations": ExpectationsPart}
PARTS["held_out"] = HeldOutPart


def _undeclared(breakdown: dict[str, Any]) -> list[str]:
    declared = get_type_hints(Breakdown)
    wrong = [key for key in breakdown if key not in declared]
    for key, part in PARTS.items():
        if key in breakdown:
            wrong += [f"{key}.{sub}" for sub in breakdown[key] if sub not in get_type_hints(part)]
    for key in set(get_type_hints(FilesPart)) - set(breakdown.get("files", {})):
        wrong.append(f"files.{key} missing")
    return wrong


def test_an_honest_fix_and_a_patch_that_does_not_apply_write_only_declared_keys() -> None:
    fix = HONEST[0]
    honest = score_patch(task_spec(fix.task_id, timeout=15), make_patch(fix.task_id, fix.edit), SPEC)
    assert honest.resolved
    assert {"files", "probes", "expectations", "tests", "outcome", "policies", "test_run_valid"} <= set(
        honest.breakdown
    )
    assert _undeclared(dict(honest.breakdown)) == []
    broken = score_patch(
        task_spec(fix.task_id, timeout=15), "--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n", SPEC
    )
    assert broken.reward == 0.0 and _undeclared(dict(broken.breakdown)) == []
