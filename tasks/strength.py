"""How strong a task's tests are, and whether they reject fixes that are the same fix.

**Test strength**: mutants of the lines the expected patch adds (the mutation engine's
operators: a flipped comparison, an off-by-one, a dropped call...) are applied on top of the
expected patch, and the hidden tests (FAIL_TO_PASS and PASS_TO_PASS) are run on each; the share
they kill is the task's test strength. A task whose tests let most wrong versions of the fix pass
rewards a patch that is merely close: a reward model or a policy learns from noise.

**Brittleness**: the expected patch, rewritten without changing what it does (a local variable
of a changed function renamed everywhere it is used), must still pass. A task whose tests
reject such a rewrite tests the spelling of one fix, not the behaviour: it is **brittle**.

Both cost one hidden-test run per mutant or rewrite, bounded by `max_mutants` and `max_rewrites`;
validation measures them when asked (`validate_tasks --test-strength`, `--min-test-strength`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import Assignment, FunctionScope, MetadataWrapper, PositionProvider, ScopeProvider

from patches import PatchError, is_test_path, parse
from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend, SandboxError
from sandbox.backends.local import LocalBackend
from tasks.builders.mutation.generate import mutants_for_source
from tasks.builders.mutation.model import Mutant
from tasks.builders.mutation.sampling import sample_mutants
from tasks.spec import TaskSpec, copy_hidden_tests, task_environment

MAX_MUTANTS = 8
MAX_REWRITES = 2
# A function that reads its own names (locals(), eval...) is not rewritten: a rename changes it.
NAME_DEPENDENT = re.compile(r"\b(?:locals|vars|eval|exec|globals|nonlocal|global)\b")


@dataclass
class Strength:
    mutants: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)  # what the tests let through
    rewrites: int = 0
    brittle: list[str] = field(default_factory=list)  # rewrites the tests rejected

    @property
    def score(self) -> float | None:
        return round(self.killed / self.mutants, 3) if self.mutants else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "score": self.score}


def measure(
    task: TaskSpec,
    tests: list[str],
    backend: Backend | str,
    limits: Limits | None = None,
    *,
    max_mutants: int = MAX_MUTANTS,
    max_rewrites: int = MAX_REWRITES,
    seed: int = 0,
) -> Strength:
    """Test strength and brittleness of `task`, judged by the hidden tests `tests` (its F2P + P2P)."""
    fixed = _fixed_sources(task)
    added = _added_lines(task.expected_patch)
    mutants = [m for path, source in fixed.items() for m in _mutants(source, path) if m.line in added.get(path, ())]
    strength = Strength()
    for mutant in sample_mutants(mutants, max_mutants, seed):
        if _passes(task, tests, backend, limits, {mutant.path: mutant.mutated}):
            strength.survivors.append(mutant.description)
        else:
            strength.killed += 1
        strength.mutants += 1
    for path, rewritten, what in _rewrites(fixed, added)[:max_rewrites]:
        strength.rewrites += 1
        if not _passes(task, tests, backend, limits, {path: rewritten}):
            strength.brittle.append(f"{path}: {what}")
    return strength


def _fixed_sources(task: TaskSpec) -> dict[str, str]:
    """The code files the expected patch changes, as it leaves them (tests left out)."""
    try:
        files = [p.path for p in parse(task.expected_patch, recount=True) if p.new_path]
    except PatchError:
        return {}
    wanted = [f for f in files if f.endswith(".py") and not is_test_path(f, task.tests_dest)]
    if not wanted:
        return {}
    # Nothing runs in this one: the trusted expected patch is applied and the files read back.
    with Sandbox(task.base_dir, LocalBackend(allow_unsafe=True)) as box:
        box.apply_patch(task.expected_patch)
        return {path: (box.workspace / path).read_text() for path in wanted if (box.workspace / path).is_file()}


def _added_lines(patch: str) -> dict[str, set[int]]:
    try:
        return {p.path: {number for number, _ in p.added_lines()} for p in parse(patch, recount=True)}
    except PatchError:
        return {}


def _mutants(source: str, path: str) -> list[Mutant]:
    try:
        return mutants_for_source(source, path)
    except cst.ParserSyntaxError:
        return []


def _passes(
    task: TaskSpec, tests: list[str], backend: Backend | str, limits: Limits | None, files: dict[str, str]
) -> bool:
    """The hidden tests `tests` on base + expected patch + `files` written over it."""
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    try:
        with Sandbox(task.base_dir, backend, limits=run_limits, environment=task_environment(task)) as box:
            box.apply_patch(task.expected_patch)
            for path, text in files.items():
                box.write_file(path, text)
            copy_hidden_tests(box, task)
            report = box.run_tests(tuple(tests), command=task.test_command)
    except SandboxError:
        return False
    return report.valid and not report.exec.timed_out and all(report.passed(t) for t in tests)


def _rewrites(fixed: dict[str, str], added: dict[str, set[int]]) -> list[tuple[str, str, str]]:
    """(path, source, what) for each rename of a local variable in a function the patch changes."""
    found = []
    for path, source in fixed.items():
        try:
            wrapper = MetadataWrapper(cst.parse_module(source))
        except cst.ParserSyntaxError:
            continue
        module, positions = wrapper.module, wrapper.resolve(PositionProvider)
        scopes = {s for s in wrapper.resolve(ScopeProvider).values() if isinstance(s, FunctionScope)}
        for scope in sorted(scopes, key=lambda s: positions[s.node].start.line):
            function = scope.node
            if not isinstance(function, cst.FunctionDef) or NAME_DEPENDENT.search(module.code_for_node(function)):
                continue
            where = positions[function]
            if not added.get(path, set()) & set(range(where.start.line, where.end.line + 1)):
                continue
            assigned: dict[str, list[Assignment]] = {}
            for assignment in scope.assignments:
                if isinstance(assignment, Assignment):
                    assigned.setdefault(assignment.name, []).append(assignment)
            for name, assignments in sorted(assigned.items()):
                if not all(isinstance(a.node, cst.Name) for a in assignments):
                    continue  # a parameter, an import or a nested definition: part of an interface
                nodes = {id(a.node) for a in assignments} | {id(r.node) for a in assignments for r in a.references}
                fresh = f"{name}_renamed"
                if fresh in source:
                    continue
                found.append((path, module.visit(_Rename(nodes, fresh)).code, f"`{name}` renamed `{fresh}`"))
                break
    return found


class _Rename(cst.CSTTransformer):
    def __init__(self, nodes: set[int], fresh: str) -> None:
        self.nodes, self.fresh = nodes, fresh

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.fresh) if id(original) in self.nodes else updated
