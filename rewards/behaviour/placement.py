"""Names and places: what a probe is called and where it goes, in the style of the hidden tests around it.

Names and places are drawn from the salt and the task (same inputs, same probes, same
reward; unpredictable without the salt): inside the hidden test files, right after the test
a probe copies, or in a new file beside them where the module can safely run twice.
`Planter` holds one planting's state: the host files read, the probes planned, the random
source every choice is drawn from (in one fixed order, so the same salt gives the same probes).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import hmac
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rewards.behaviour.hosts import HostFile, Insert, NewFile, bound_names, read_host
from rewards.behaviour.model import NodeRef, ProbeError, Probes
from tasks.spec import TaskSpec

# Words to pad a probe's name with when the hidden tests' own names give too few.
COMMON_WORDS = tuple(
    "value values result input returns keeps with without when after still only all first new same empty single "
    "default is are".split()
)
WORD = re.compile(r"^[a-z][a-z0-9]{0,15}$")


@dataclass
class Planned:
    """One probe on its way into a file."""

    kind: str  # canary | twin
    source: NodeRef
    func: ast.FunctionDef | ast.AsyncFunctionDef  # the probe
    class_node: ast.ClassDef | None
    source_func: ast.FunctionDef | ast.AsyncFunctionDef  # the test it copies, as it stands in its file
    name: str = ""
    ids: list[tuple[str, str]] = field(default_factory=list)  # (probe id, source id)
    where: str = ""  # file it went into


def _rng(salt: bytes, task: TaskSpec, purpose: str) -> random.Random:
    material = "\n".join([purpose, task.task_id, *task.fail_to_pass, *task.pass_to_pass]).encode()
    digest = hmac.new(salt, material, hashlib.sha256).digest()
    return random.Random(int.from_bytes(digest, "big"))  # noqa: S311 - placement, not cryptography


def name_words(names: Iterable[str]) -> list[str]:
    found = []
    for name in names:
        for part in name.lower().split("_"):
            if WORD.match(part) and part != "test" and part not in found:
                found.append(part)
    return found


def _test_names(host: HostFile) -> list[str]:
    return [
        n.name
        for n in ast.walk(host.tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    ]


def fresh_name(rng: random.Random, words: list[str], taken: set[str], prefix: str = "test_") -> str:
    pool = words + [w for w in COMMON_WORDS if w not in words] if len(words) < 6 else list(words)
    for _ in range(200):
        size = rng.choice((2, 3, 3, 4))
        name = prefix + "_".join(rng.sample(pool, min(size, len(pool))))
        if name not in taken:
            taken.add(name)
            return name
    raise ProbeError("no free name")


def _indent_of(host: HostFile, node: ast.stmt) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    line = host.lines[first - 1]
    return line[: len(line) - len(line.lstrip())]


def _start_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _render(node: ast.AST, indent: str) -> str:
    text = ast.unparse(ast.fix_missing_locations(node))
    return "".join(indent + line + "\n" if line else "\n" for line in text.splitlines())


def _collected_top_level(stmt: ast.stmt) -> bool:
    """A module-level statement that pytest would collect as tests (left out of a new file's preamble)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return stmt.name.startswith("test")
    if isinstance(stmt, ast.ClassDef):
        bases = " ".join(ast.unparse(b) for b in stmt.bases)
        return stmt.name.startswith("Test") or "TestCase" in bases
    if isinstance(stmt, ast.If):
        return "__main__" in ast.unparse(stmt.test)
    return False


# What a new file may repeat of its host's module level: a second run of anything else
# (a model class registering itself, a session fixture, a call into the code under test)
# could change what the hidden tests see.
SAFE_CALLS = frozenset(
    {"compile", "namedtuple", "TypeVar", "object", "frozenset", "set", "dict", "list", "tuple", "Decimal"}
    | {"Fraction", "Path", "PurePosixPath", "getLogger", "param", "parametrize", "skipif", "mark", "fixture"}
)
SAFE_CLASS_DECORATORS = frozenset({"dataclass", "total_ordering"})
SAFE_BASES = frozenset({"object", "Exception", "ValueError", "TypeError", "KeyError", "RuntimeError", "dict", "list"})


def _duplicable(host: HostFile) -> bool:
    """Whether the host's module level can run again, in a new file, without side effects or missing names."""
    if host.duplicable is None:
        host.duplicable = _repeatable(host.tree) and _names_resolve(host.tree)
    return host.duplicable


def _repeatable(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if _collected_top_level(stmt) or isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                return False  # the names it binds are unknown here
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            marks = " ".join(ast.unparse(d) for d in stmt.decorator_list)
            if "autouse" in marks or "scope" in marks or not _safe_calls(stmt.decorator_list):
                return False
            continue
        if isinstance(stmt, ast.ClassDef):
            names = {_call_name(d) for d in stmt.decorator_list}
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in stmt.bases}
            if names - SAFE_CLASS_DECORATORS or bases - SAFE_BASES or stmt.keywords:
                return False
            continue
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and _safe_calls([stmt.value] if stmt.value else []):
            continue
        return False
    return True


def _names_resolve(tree: ast.Module) -> bool:
    """Every name the new file evaluates on import is bound by what it copies (or is a builtin).

    A new file repeats the host's module level without its tests, so a decorator or a
    default that names a test function or class would fail there, and one module that fails
    to import stops the whole run.
    """
    kept = [stmt for stmt in tree.body if not _collected_top_level(stmt)]
    tests = [s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and _collected_top_level(s)]
    bound = set(dir(builtins)) | {"__file__", "__name__", "__doc__"}
    used: set[str] = set()
    for stmt in kept:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(stmt.name)
        for node in _import_time_nodes(stmt):
            if isinstance(node, ast.Name):
                (bound.add if isinstance(node.ctx, ast.Store | ast.Del) else used.add)(node.id)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
    for test in tests:
        for node in _import_time_nodes(test):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add(node.id)
    return used <= bound


def _import_time_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a module-level statement that run when the module is imported."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        roots: list[ast.AST] = [*stmt.decorator_list, *stmt.args.defaults]
        roots += [d for d in stmt.args.kw_defaults if d is not None]
        # Annotations too: evaluated at definition unless postponed (PEP 563); counted either way.
        roots += [a.annotation for a in ast.walk(stmt.args) if isinstance(a, ast.arg) and a.annotation]
        roots += [stmt.returns] if stmt.returns else []
    elif isinstance(stmt, ast.ClassDef):
        roots = [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]
        for inner in stmt.body:
            yield from _import_time_nodes(inner)
    else:
        roots = [stmt]
    for root in roots:
        yield from ast.walk(root)


def _call_name(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _safe_calls(nodes: list[ast.expr]) -> bool:
    return all(
        _call_name(sub) in SAFE_CALLS
        for node in nodes
        for sub in ast.walk(node)
        if isinstance(sub, ast.Call) or (isinstance(sub, ast.Attribute) and sub is node)
    )


def new_file_text(new: NewFile) -> str:
    host = new.host
    lines = host.lines
    keep: set[int] = set()
    for stmt in host.tree.body:
        if not _collected_top_level(stmt):
            keep.update(range(_start_line(stmt), (stmt.end_lineno or stmt.lineno) + 1))
    parts = ["".join(lines[i - 1] for i in sorted(keep))]
    parts += ["\n\n" + text for text in new.module_funcs]
    return "".join(parts)


def apply_inserts(host: HostFile) -> str:
    lines = host.lines
    for insert in sorted(host.inserts, key=lambda i: i.key, reverse=True):
        lines[insert.after_line : insert.after_line] = [insert.text]
    return "".join(lines)


class Planter:
    def __init__(self, workspace: Path, task: TaskSpec, salt: bytes) -> None:
        self.workspace = workspace
        self.task = task
        self.rng = _rng(salt, task, "probes")
        self.hosts: dict[str, HostFile] = {}
        self.host_errors: dict[str, str] = {}
        self.probes = Probes()
        self.planned: list[Planned] = []
        self.order = 0
        self._basenames: set[str] | None = None

    def host(self, rel: str) -> HostFile:
        if rel in self.host_errors:
            raise ProbeError(self.host_errors[rel])
        if rel not in self.hosts:
            try:
                self.hosts[rel] = read_host(self.workspace, rel)
            except ProbeError as exc:
                self.host_errors[rel] = str(exc)
                raise
        return self.hosts[rel]

    def words(self, host: HostFile) -> list[str]:
        return name_words(_test_names(host))

    # where a probe goes ---------------------------------------------------------
    def place(self, plan: Planned, host: HostFile) -> None:
        text_node = plan.func
        text_node.name = plan.name
        # Drawn even when a new file is not possible, so one host's shape does not move the others' probes.
        in_new_file = self.rng.random() < 0.5 and plan.class_node is None and _duplicable(host)
        if in_new_file:
            new = self.sibling(host)
            plan.where = new.rel
            new.module_funcs.append(_render(text_node, ""))
        else:
            plan.where = host.rel
            # Right after the test it copies: its decorators then see the names they saw there.
            source = plan.source_func
            indent = _indent_of(host, source) if plan.class_node is not None else ""
            rank = 0 if plan.class_node is not None else 1
            self.order += 1
            host.inserts.append(
                Insert(source.end_lineno or source.lineno, "\n\n" + _render(text_node, indent), self.order, rank)
            )

    def sibling(self, host: HostFile) -> NewFile:
        if host.new_sibling is None:
            directory = PurePosixPath(host.rel).parent
            taken = self.basenames()
            words = self.words(host) + name_words([PurePosixPath(host.rel).stem])
            for _ in range(50):
                name = fresh_name(self.rng, words, set(taken))
                if name not in taken and not (self.workspace / directory / f"{name}.py").exists():
                    break
            else:
                raise ProbeError("no free file name beside its file")
            taken.add(name)
            host.new_sibling = NewFile((directory / f"{name}.py").as_posix(), host)
        return host.new_sibling

    def basenames(self) -> set[str]:
        """Module names already taken: a test module beside them must not shadow or collide."""
        if self._basenames is None:
            found = set()
            for path in self.workspace.rglob("*.py"):
                found.add(path.stem)
            for path in self.workspace.rglob("*"):
                if path.is_dir():
                    found.add(path.name)
            self._basenames = found
        return self._basenames

    def taken_names(self, host: HostFile, plan: Planned) -> set[str]:
        taken = set(host.module_names)
        if plan.class_node is not None:
            taken |= bound_names(plan.class_node.body)
        taken |= {p.name for p in self.planned}
        return taken
