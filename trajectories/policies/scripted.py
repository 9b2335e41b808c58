"""The oracle: reaches the expected patch through real tool calls (read, edit, test, submit).

It proves the pipeline end to end (a correct fix must score 1) and drives benchmarks
with a policy whose own cost is zero.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from core.vocabulary import ActionType, PolicyKind
from patches import FileStatus, Hunk, PatchError, parse
from trajectories.policies.base import Message, Policy, PolicyError, PolicyOutput, ToolCall


class ScriptedPolicy(Policy):
    kind = PolicyKind.SCRIPTED

    def __init__(self, base_dir: Path, expected_patch: str) -> None:
        if not expected_patch.strip():
            raise PolicyError("the scripted policy needs the task's expected patch")
        self.plan = _plan(base_dir, expected_patch)
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "oracle", "checkpoint": "", "temperature": 0.0, "top_p": 1.0, "seed": 0}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        if self.position >= len(self.plan):
            return PolicyOutput("", ToolCall(ActionType.SUBMIT, {}))
        thought, call = self.plan[self.position]
        self.position += 1
        return PolicyOutput(thought, call)


def _plan(base_dir: Path, patch: str) -> list[tuple[str, ToolCall]]:
    """Read each file, then edit hunk by hunk (whole-file write when a hunk is ambiguous)."""
    # The fixed tree is needed only while the plan is made; kept, it would be a repository copy per rollout.
    with tempfile.TemporaryDirectory(prefix="crucible-oracle-") as tmp:
        fixed = Path(tmp) / "fixed"
        _apply(base_dir, fixed, patch)
        try:
            file_patches = parse(patch)
        except PatchError as exc:
            raise PolicyError(f"the expected patch is not a readable diff: {exc}") from None
        plan: list[tuple[str, ToolCall]] = []
        for file_patch in file_patches:
            path = file_patch.path
            if file_patch.status is FileStatus.DELETED:
                remove = ToolCall(ActionType.RUN_COMMAND, {"command": f"rm -- {shlex.quote(path)}"})
                plan.append((f"{path} should go.", remove))
                continue
            new_text = (fixed / path).read_text()
            if file_patch.status is FileStatus.ADDED:
                plan.append((f"Create {path}.", ToolCall(ActionType.WRITE_FILE, {"path": path, "content": new_text})))
                continue
            old_text = (base_dir / path).read_text()
            plan.append((f"Look at {path}.", ToolCall(ActionType.READ_FILE, {"path": path})))
            plan += _edits(path, old_text, new_text, file_patch.hunks)
    plan.append(("Check the visible tests.", ToolCall(ActionType.RUN_TESTS, {})))
    plan.append(("The fix is in place.", ToolCall(ActionType.SUBMIT, {})))
    return plan


def _edits(path: str, old_text: str, new_text: str, hunks: list[Hunk]) -> list[tuple[str, ToolCall]]:
    edits = []
    current = old_text
    for hunk in hunks:
        before, after = hunk.before(), hunk.after()
        if before and current.count(before) == 1:
            edits.append(
                (f"Fix {path}.", ToolCall(ActionType.EDIT_FILE, {"path": path, "old_text": before, "new_text": after}))
            )
            current = current.replace(before, after, 1)
    if current != new_text:
        # Hunks that are not unique (or the file lacks a final newline): write it whole.
        return [(f"Rewrite {path}.", ToolCall(ActionType.WRITE_FILE, {"path": path, "content": new_text}))]
    return edits


def _apply(base_dir: Path, work: Path, patch: str) -> None:
    shutil.copytree(base_dir, work)
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"],
        cwd=work,
        input=patch.encode(),
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    if done.returncode != 0:
        raise PolicyError(f"the expected patch does not apply: {done.stderr.decode()[:300]}")
