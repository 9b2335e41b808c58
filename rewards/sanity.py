"""Does the reward separate good code from bad? (seed §11)

Per task: the expected patch must score 1, an empty patch at most 0, and stubs of the
functions the expected patch changes (body replaced by `return None`, `pass`, or a
constant) less than 1. A task whose reward cannot tell these apart is useless for RL.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewards.diffs import split_patch
from rewards.scoring import score_patch
from tasks.spec import TaskSpec
from rewards.spec import RewardSpec
from sandbox.backends.base import Backend

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
        return {"task_id": self.task_id, "expected": self.expected, "empty": self.empty, "stubs": self.stubs,
                "gap": self.gap, "separates": self.separates}


def changed_functions(base: Path, patch: str) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Functions in the base whose lines the expected patch touches, per file."""
    found: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for file_patch in split_patch(patch):
        path = file_patch.old_path
        if not path or not path.endswith(".py") or not (base / path).is_file():
            continue
        touched = _touched_lines(file_patch.text)
        tree = ast.parse((base / path).read_text())
        funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                 and touched & set(range(n.lineno, (n.end_lineno or n.lineno) + 1))]
        # Outermost only: replacing an outer function's body removes any nested one too.
        found[path] = [f for f in funcs if not any(o is not f and f in ast.walk(o) for o in funcs)]
    return found


def _touched_lines(text: str) -> set[int]:
    """Base line numbers a hunk removes, or inserts before: context lines do not count."""
    touched: set[int] = set()
    old = 0
    for line in text.splitlines():
        if line.startswith("@@"):
            old = int(line.split()[1][1:].partition(",")[0])
        elif line.startswith("-") and not line.startswith("---"):
            touched.add(old)
            old += 1
        elif line.startswith("+") and not line.startswith("+++"):
            touched.add(max(old - 1, 1))
        elif line.startswith(" "):
            old += 1
    return touched


def stub_patch(base: Path, patch: str, body: str) -> str:
    """A git-format patch replacing each changed function's body with `body`."""
    out = []
    for path, funcs in changed_functions(base, patch).items():
        lines = (base / path).read_text().splitlines(keepends=True)
        new = list(lines)
        for func in sorted(funcs, key=lambda f: f.lineno, reverse=True):
            first = func.body[0]
            # Keep the docstring, replace everything after it.
            start = func.body[1].lineno if (len(func.body) > 1 and isinstance(first, ast.Expr)
                                            and isinstance(first.value, ast.Constant)) else first.lineno
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(func.body) == 1:
                start = (first.end_lineno or first.lineno) + 1
            indent = " " * (func.body[-1].col_offset)
            new[start - 1:func.end_lineno] = [f"{indent}{body}\n"]
        diff = difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}")
        text = "".join(diff)
        if text:
            out.append(f"diff --git a/{path} b/{path}\n{text}")
    return "".join(out)


def check_task(task: TaskSpec, expected_patch: str, spec: RewardSpec, backend: Backend | str = "bwrap") -> SanityResult:
    result = SanityResult(task.task_id, score_patch(task, expected_patch, spec, backend).reward,
                          score_patch(task, "", spec, backend).reward)
    for name, body in STUB_BODIES.items():
        stub = stub_patch(task.base_dir, expected_patch, body)
        if stub:
            result.stubs[name] = score_patch(task, stub, spec, backend).reward
    return result
