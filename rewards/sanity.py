"""Does the reward separate good code from bad? If it cannot, RL on the task is useless.

Per task: the expected patch must score 1, an empty patch at most 0, and stubs of the
functions the expected patch changes (body replaced by `return None`, `pass`, or a
constant) less than 1. A task whose reward cannot tell these apart is useless for RL.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.vocabulary import DEFAULT_BACKEND
from patches import changed_functions, render, split_lines, text_patch
from rewards.scoring import score_patch
from rewards.spec import RewardSpec
from sandbox.backends.base import Backend
from tasks.spec import TaskSpec

STUB_BODIES = {"return None": "return None", "pass": "pass", "constant": "return 0"}


@dataclass
class SanityResult:
    task_id: str
    expected: float
    empty: float
    stubs: dict[str, float] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """How far the expected patch stands above the best wrong one."""
        wrong = [self.empty, *self.stubs.values()]
        return round(self.expected - max(wrong), 6)

    @property
    def separates(self) -> bool:
        return self.expected == 1.0 and self.empty <= 0 and all(v < 1 for v in self.stubs.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "expected": self.expected,
            "empty": self.empty,
            "stubs": self.stubs,
            "gap": self.gap,
            "separates": self.separates,
        }


def stub_patch(base: Path, patch: str, body: str) -> str:
    """A git-format patch replacing each changed function's body with `body`."""
    out = []
    for path, funcs in changed_functions(base, patch).items():
        text = (base / path).read_text()
        lines = split_lines(text)
        new = list(lines)
        for func in sorted(funcs, key=lambda f: f.lineno, reverse=True):
            first = func.body[0]
            # Keep the docstring, replace everything after it.
            start = (
                func.body[1].lineno
                if (len(func.body) > 1 and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant))
                else first.lineno
            )
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(func.body) == 1:
                start = (first.end_lineno or first.lineno) + 1
            indent = " " * (func.body[-1].col_offset)
            new[start - 1 : func.end_lineno] = [f"{indent}{body}\n"]
        stub = text_patch(path, text, "".join(new))
        if stub is not None:
            out.append(render(stub))
    return "".join(out)


def check_task(
    task: TaskSpec, expected_patch: str, spec: RewardSpec, backend: Backend | str = DEFAULT_BACKEND
) -> SanityResult:
    result = SanityResult(
        task.task_id,
        score_patch(task, expected_patch, spec, backend).reward,
        score_patch(task, "", spec, backend).reward,
    )
    for name, body in STUB_BODIES.items():
        stub = stub_patch(task.base_dir, expected_patch, body)
        if stub:
            result.stubs[name] = score_patch(task, stub, spec, backend).reward
    return result
