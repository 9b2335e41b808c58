"""The oracle: reaches the expected patch through real tool calls (read, edit, test, submit).

It proves the pipeline end to end (a correct fix must score 1) and drives benchmarks
with a policy whose own cost is zero.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rewards.diffs import split_patch
from trajectories.policies.base import Message, Policy, PolicyError, PolicyOutput, ToolCall


class ScriptedPolicy(Policy):
    kind = "scripted"

    def __init__(self, base_dir: Path, expected_patch: str) -> None:
        if not expected_patch.strip():
            raise PolicyError("the scripted policy needs the task's expected patch")
        self.plan = _plan(base_dir, expected_patch)
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "oracle", "checkpoint": "", "temperature": 0.0, "top_p": 1.0, "seed": 0}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        if self.position >= len(self.plan):
            return PolicyOutput("", ToolCall("submit", {}))
        thought, call = self.plan[self.position]
        self.position += 1
        return PolicyOutput(thought, call)


def _plan(base_dir: Path, patch: str) -> list[tuple[str, ToolCall]]:
    """Read each file, then edit hunk by hunk (whole-file write when a hunk is ambiguous)."""
    fixed = _fixed_tree(base_dir, patch)
    plan: list[tuple[str, ToolCall]] = []
    for file_patch in split_patch(patch):
        path = file_patch.path
        if file_patch.new_path is None:
            plan.append((f"{path} should go.", ToolCall("run_command", {"command": f"rm -- '{path}'"})))
            continue
        new_text = (fixed / path).read_text()
        if file_patch.old_path is None:
            plan.append((f"Create {path}.", ToolCall("write_file", {"path": path, "content": new_text})))
            continue
        old_text = (base_dir / path).read_text()
        plan.append((f"Look at {path}.", ToolCall("read_file", {"path": path})))
        plan += _edits(path, old_text, new_text, file_patch.text)
    plan.append(("Check the visible tests.", ToolCall("run_tests", {})))
    plan.append(("The fix is in place.", ToolCall("submit", {})))
    return plan


def _edits(path: str, old_text: str, new_text: str, hunks: str) -> list[tuple[str, ToolCall]]:
    edits = []
    current = old_text
    for hunk in hunks.split("\n@@")[1:]:
        body = hunk.split("\n", 1)[1] if "\n" in hunk else ""
        before = "".join(line[1:] + "\n" for line in body.splitlines() if line[:1] in (" ", "-"))
        after = "".join(line[1:] + "\n" for line in body.splitlines() if line[:1] in (" ", "+"))
        if before and current.count(before) == 1:
            edits.append((f"Fix {path}.", ToolCall("edit_file", {"path": path, "old_text": before, "new_text": after})))
            current = current.replace(before, after, 1)
    if current != new_text:
        # Hunks that are not unique (or the file lacks a final newline): write it whole.
        return [(f"Rewrite {path}.", ToolCall("write_file", {"path": path, "content": new_text}))]
    return edits


def _fixed_tree(base_dir: Path, patch: str) -> Path:
    work = Path(tempfile.mkdtemp(prefix="crucible-oracle-"))
    shutil.copytree(base_dir, work, dirs_exist_ok=True)
    done = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=work, input=patch.encode(),
                          capture_output=True, env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"})
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise PolicyError(f"the expected patch does not apply: {done.stderr.decode()[:300]}")
    return work
