"""eq_override: a rich comparison (or __contains__) that makes every assertion on its result pass.

A comparison may be defined, bound (a lambda, setattr, a namespace dict, a factory, a decorator's
wrapper) or hidden behind a check that never looks at the other value; each path a comparison
can return through is given a verdict, and honest comparisons (deferring, stateless markers,
guards that compare both sides) are told apart from the ones that always agree.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Iterator

from rewards.anticheat.folding import Folding
from rewards.anticheat.patterns import (
    COMPARISONS,
    EQ_OVERRIDE,
    NOT_BOOLEAN,
    SAFE_DECORATORS,
    STATEFUL_BASES,
    STATEFUL_METHODS,
)
from rewards.anticheat.source import snippet_of

# --- verdicts of an expression used as the result of a comparison ---------------------

COMPARES, TRUE, FALSE, NOT_COMPARISON, UNKNOWN = "compares", "true", "false", "not-a-comparison", "unknown"
DEFERS = "defers"  # NotImplemented: Python asks the other operand


class _Function:
    """A function (or lambda) bound as a comparison, with what its analysis needs."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, static: bool = False) -> None:
        self.node = node
        args = node.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        self.self_names = set() if static else set(positional[:1])
        others = positional if static else positional[1:]
        if args.vararg:
            others.append(args.vararg.arg)
        self.other_names = set(others)
        self.body: list[ast.stmt] = (
            [ast.copy_location(ast.Return(value=node.body), node)] if isinstance(node, ast.Lambda) else list(node.body)
        )
        self.locals: dict[str, ast.expr] = {}
        counts: Counter[str] = Counter()
        for sub in self._own_nodes():
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                self.locals[sub.targets[0].id] = sub.value
                counts[sub.targets[0].id] += 1
            elif isinstance(sub, ast.AugAssign | ast.AnnAssign) and isinstance(sub.target, ast.Name):
                counts[sub.target.id] += 2
        self.locals = {k: v for k, v in self.locals.items() if counts[k] == 1}
        # A local copy of the other value still reads it (`o = other; return self.x == o.x`).
        for name, value in list(self.locals.items()):
            if _reads(value, self.other_names):
                self.other_names.add(name)
            if _reads(value, self.self_names):
                self.self_names.add(name)

    def _own_nodes(self) -> Iterator[ast.AST]:
        stack: list[ast.AST] = list(self.body)
        while stack:
            node = stack.pop()
            yield node
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                    stack.append(child)


def _trivial(compare: ast.Compare) -> bool | None:
    """True/False when a comparison has one value on both sides (`x is x`), else None."""
    if len(compare.ops) != 1:
        return None
    if ast.dump(compare.left) != ast.dump(compare.comparators[0]):
        return None
    op = compare.ops[0]
    if isinstance(op, ast.Eq | ast.Is | ast.LtE | ast.GtE):
        return True
    if isinstance(op, ast.NotEq | ast.IsNot | ast.Lt | ast.Gt):
        return False
    return None


def _reads(node: ast.AST, names: set[str]) -> bool:
    """Whether an expression reads one of the names, other than in a comparison with itself."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Compare) and _trivial(current) is not None:
            continue
        if isinstance(current, ast.Name) and current.id in names:
            return True
        stack.extend(ast.iter_child_nodes(current))
    return False


class Equality(Folding):
    """A source whose comparisons can be checked for always agreeing."""

    def _defined_comparison(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """A comparison written with `def`, and any local decorator that may swap it for a wrapper."""
        if isinstance(node, ast.ClassDef) or node.name not in COMPARISONS:
            return
        static = any(self.qual(d) == "builtins.staticmethod" for d in node.decorator_list)
        problem = self._comparison_problem(_Function(node, static), node.name)
        for decorator in node.decorator_list:
            if problem:
                break
            # A decorator written here may swap the method for a wrapper: check what it returns.
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.qual(target) not in SAFE_DECORATORS and isinstance(target, ast.Name):
                for wrapper in self._returned_functions(self.defs.get(target.id, []), 2):
                    problem = self._comparison_problem(_Function(wrapper), node.name)
                    if problem:
                        problem = f"is wrapped by {target.id}, whose replacement {problem}"
                        break
        if problem:
            self._eq(node, f"{node.name} {problem}")

    def _returned_functions(
        self, factories: Iterable[ast.FunctionDef | ast.AsyncFunctionDef], depth: int
    ) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda]:
        """Functions that locally defined factories or decorators return (through `depth` levels)."""
        for factory in factories:
            nested = {
                d.name: d
                for d in ast.walk(factory)
                if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef) and d is not factory
            }
            for sub in _Function(factory)._own_nodes():
                if not isinstance(sub, ast.Return) or sub.value is None:
                    continue
                if isinstance(sub.value, ast.Lambda):
                    yield sub.value
                elif isinstance(sub.value, ast.Name) and sub.value.id in nested:
                    inner = nested[sub.value.id]
                    yield inner
                    if depth > 1:
                        yield from self._returned_functions([inner], depth - 1)

    def _binding_target(self, target: ast.expr, value: ast.expr, node: ast.AST) -> None:
        if isinstance(target, ast.Name) and target.id in COMPARISONS:
            self._bound(target.id, value, node, monkeypatch=False)
        elif isinstance(target, ast.Attribute) and target.attr in COMPARISONS:
            self._bound(target.attr, value, node, monkeypatch=True)
        elif isinstance(target, ast.Subscript):
            key = self.fold_str(target.slice)
            if key in COMPARISONS:
                self._bound(key, value, node, monkeypatch=True)
        elif isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
            for sub_target, sub_value in zip(target.elts, value.elts, strict=False):
                self._binding_target(sub_target, sub_value, node)

    def _eq(self, node: ast.AST, why: str) -> None:
        self.add(EQ_OVERRIDE, why, node)

    def _bound(self, dunder: str, value: ast.expr, node: ast.AST, monkeypatch: bool) -> None:
        """A comparison bound to a value: a lambda, a function, another comparison, ..."""
        problem = self._bound_problem(dunder, value, monkeypatch, set())
        if problem:
            self._eq(node, f"{dunder} {problem}")

    def _bound_problem(self, dunder: str, value: ast.expr, monkeypatch: bool, seen: set[str]) -> str | None:
        if isinstance(value, ast.Lambda):
            return self._comparison_problem(_Function(value), dunder)
        if isinstance(value, ast.Constant) and value.value is None:
            return None
        if isinstance(value, ast.Name):
            found = self.defs.get(value.id)
            if found and value.id not in seen:
                seen.add(value.id)
                problems = [self._comparison_problem(_Function(d), dunder) for d in found]
                return next((p for p in problems if p), None)
            if value.id in self.consts and value.id not in seen:
                seen.add(value.id)
                return self._bound_problem(dunder, self.consts[value.id], monkeypatch, seen)
            return "is bound to a function that cannot be checked here" if monkeypatch else None
        if isinstance(value, ast.Attribute):
            if value.attr == dunder:
                return None  # reuses a class's own comparison (object.__eq__, Base.__eq__)
            if value.attr in COMPARISONS:
                return f"is bound to {value.attr}, a different comparison"
            found = self.defs.get(value.attr)
            if found:
                problems = [self._comparison_problem(_Function(d), dunder) for d in found]
                return next((p for p in problems if p), None)
            return "is bound to a function that cannot be checked here" if monkeypatch else None
        if isinstance(value, ast.Call):
            func = self.qual(value.func)
            if func in ("builtins.staticmethod", "builtins.classmethod", "functools.partialmethod") and value.args:
                return self._bound_problem(dunder, value.args[0], monkeypatch, seen)
            # A local factory: what it returns is what gets bound.
            if isinstance(value.func, ast.Name) and value.func.id in self.defs:
                for made in self._returned_functions(self.defs[value.func.id], 2):
                    problem = self._comparison_problem(_Function(made), dunder)
                    if problem:
                        return problem
                return None
            return "is bound to what a call returns, which cannot be checked here" if monkeypatch else None
        return "is bound to something that is not a comparison"

    # -- is this function a comparison? -------------------------------------------------

    def _comparison_problem(self, fn: _Function, dunder: str) -> str | None:
        node = fn.node
        if isinstance(node, ast.AsyncFunctionDef):
            return "is a coroutine: its result is always truthy"
        if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in fn._own_nodes()):
            return "is a generator: its result is always truthy"
        returns = [n for n in fn._own_nodes() if isinstance(n, ast.Return) and n.value is not None]
        if not returns:
            return None  # a stub, or one that raises: there is no result to fake
        cheat = TRUE if COMPARISONS[dunder] else FALSE
        honest_constant = FALSE if cheat == TRUE else TRUE
        verdicts, falls = self._paths(fn.body, fn)
        if falls:
            verdicts.add(FALSE)  # falling off the end returns None
        # Deferring (NotImplemented) or always saying "different" fakes nothing.
        fakes = verdicts - {DEFERS, honest_constant}
        if not fn.other_names:
            return "takes no value to compare with" if fakes else None
        if not any(_reads(stmt, fn.other_names) for stmt in fn.body):
            return "never looks at the value it compares with" if fakes else None
        shown = "True" if cheat == TRUE else "False"
        if verdicts == {cheat}:
            return f"returns {shown} whatever it is compared with"
        for ret, conditional, handler in self._returns(fn.body, fn, False, False):
            verdict = self._verdict(ret.value, fn) if ret.value is not None else FALSE
            snippet = snippet_of(self.lines, ret.value) if ret.value is not None else "None"
            if verdict == NOT_COMPARISON:
                return f"returns {snippet}, which is not a comparison"
            if verdict == cheat and handler:
                return f"returns {snippet} when comparing fails"
            if verdict == cheat and not conditional and not self._guarded(fn, ret) and not self._stateless(fn, ret):
                return f"returns {snippet} after checks that never compare it with the other value"
        return None

    def _stateless(self, fn: _Function, ret: ast.Return) -> bool:
        """`if not isinstance(other, Cls): return NotImplemented; return True` in a class without state.

        All instances of a class that holds no state are honestly equal (hash algorithms,
        markers). A class with an __init__, fields or a container base is not such a class.
        """
        cls = self.classes.get(id(fn.node))
        if cls is None or cls.decorator_list:
            return False
        for base in cls.bases:
            if self.qual(base) in STATEFUL_BASES:
                return False
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in STATEFUL_METHODS:
                return False
            if isinstance(item, ast.AnnAssign):
                return False
            if isinstance(item, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets
            ):
                return False
        for sub in fn._own_nodes():
            if isinstance(sub, ast.If) and sub.lineno < ret.lineno and _reads(sub.test, fn.other_names):
                mentions_class = any(
                    (isinstance(n, ast.Name) and n.id == cls.name)
                    or (isinstance(n, ast.Attribute) and n.attr == "__class__")
                    or (isinstance(n, ast.Call) and self.qual(n.func) == "builtins.type")
                    for n in ast.walk(sub.test)
                )
                rejects = any(
                    isinstance(r, ast.Return) and r.value is not None and self._verdict(r.value, fn) in (DEFERS, FALSE)
                    for r in sub.body
                )
                if mentions_class and rejects:
                    return True
        return False

    def _guarded(self, fn: _Function, ret: ast.Return) -> bool:
        """Whether a check before `ret` compares this object with the other and can return early."""
        for sub in fn._own_nodes():
            if isinstance(sub, ast.If | ast.While) and sub.lineno < ret.lineno:
                if self._condition(sub.test, fn) not in (TRUE, FALSE) and _reads(sub.test, fn.other_names):
                    if _reads(sub.test, fn.self_names) and any(isinstance(s, ast.Return) for s in ast.walk(sub)):
                        return True
        return False

    def _condition(self, test: ast.expr, fn: _Function) -> str:
        try:
            return self._verdict(test, fn)
        except RecursionError:
            return UNKNOWN

    def _paths(self, body: list[ast.stmt], fn: _Function) -> tuple[set[str], bool]:
        """The verdicts of the values a block can return, and whether it can fall through."""
        verdicts: set[str] = set()
        for stmt in body:
            if isinstance(stmt, ast.Return):
                verdicts.add(self._condition(stmt.value, fn) if stmt.value is not None else FALSE)
                return verdicts, False
            if isinstance(stmt, ast.Raise):
                return verdicts, False
            falls = True
            if isinstance(stmt, ast.If):
                test = self._condition(stmt.test, fn)
                if test == TRUE:
                    found, falls = self._paths(stmt.body, fn)
                elif test == FALSE:
                    found, falls = self._paths(stmt.orelse, fn)
                else:
                    found, falls_body = self._paths(stmt.body, fn)
                    other, falls_else = self._paths(stmt.orelse, fn)
                    found |= other
                    falls = falls_body or falls_else
                verdicts |= found
            elif isinstance(stmt, ast.Try | ast.TryStar):
                found, _ = self._paths(stmt.body, fn)
                for handler in stmt.handlers:
                    found |= self._paths(handler.body, fn)[0]
                found |= self._paths(stmt.orelse, fn)[0]
                final, final_falls = self._paths(stmt.finalbody, fn)
                if stmt.finalbody and not final_falls:
                    return verdicts | final, False  # a return in `finally` wins over every other
                verdicts |= found | final
            elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While | ast.Match):
                blocks: list[list[ast.stmt]] = (
                    [c.body for c in stmt.cases] if isinstance(stmt, ast.Match) else [stmt.body]
                )
                for block in blocks:
                    verdicts |= self._paths(block, fn)[0]
            if not falls:
                return verdicts, False
        return verdicts, True

    def _returns(
        self, body: list[ast.stmt], fn: _Function, conditional: bool, handler: bool
    ) -> Iterator[tuple[ast.Return, bool, bool]]:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                yield stmt, conditional, handler
            elif isinstance(stmt, ast.If):
                test = self._condition(stmt.test, fn)
                yield from self._returns(stmt.body, fn, conditional or test != TRUE, handler)
                yield from self._returns(stmt.orelse, fn, conditional or test != FALSE, handler)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                yield from self._returns(stmt.body, fn, conditional, handler)
                for part in stmt.handlers:
                    yield from self._returns(part.body, fn, True, True)
                yield from self._returns(stmt.orelse, fn, True, handler)
                yield from self._returns(stmt.finalbody, fn, conditional, handler)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                yield from self._returns(stmt.body, fn, conditional, handler)
            elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
                always = isinstance(stmt, ast.While) and self._condition(stmt.test, fn) == TRUE
                if isinstance(stmt, ast.For | ast.AsyncFor):
                    items = self.fold(stmt.iter)
                    always = isinstance(items, list | str | bytes) and len(items) > 0
                yield from self._returns(stmt.body, fn, conditional or not always, handler)
                yield from self._returns(stmt.orelse, fn, True, handler)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    yield from self._returns(case.body, fn, True, handler)

    def _verdict(self, node: ast.expr, fn: _Function) -> str:  # noqa: C901 - one case per kind of expression
        """What an expression returned from a comparison amounts to."""
        if isinstance(node, ast.Constant):
            return TRUE if node.value else FALSE
        if isinstance(node, ast.Name):
            if node.id == "NotImplemented":
                return DEFERS
            if node.id in fn.other_names and node.id not in fn.locals:
                return NOT_COMPARISON
            if node.id in fn.self_names and node.id not in fn.locals:
                return NOT_COMPARISON
            if node.id in fn.locals:
                return self._verdict(fn.locals[node.id], fn)
            return UNKNOWN
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return TRUE if node.elts else FALSE
        if isinstance(node, ast.Dict):
            return TRUE if node.keys else FALSE
        if isinstance(node, ast.Lambda | ast.GeneratorExp):
            return TRUE
        if isinstance(node, ast.JoinedStr):
            return TRUE if any(isinstance(v, ast.Constant) and v.value for v in node.values) else UNKNOWN
        if isinstance(node, ast.Compare):
            trivial = _trivial(node)
            if trivial is not None:
                return TRUE if trivial else FALSE
            return COMPARES if _reads(node, fn.other_names) else UNKNOWN
        if isinstance(node, ast.BoolOp):
            verdicts = [self._verdict(v, fn) for v in node.values]
            if isinstance(node.op, ast.Or):
                if TRUE in verdicts:
                    return TRUE
                if all(v == FALSE for v in verdicts):
                    return FALSE
            else:
                if FALSE in verdicts:
                    return FALSE
                if all(v == TRUE for v in verdicts):
                    return TRUE
                if verdicts[-1] == NOT_COMPARISON:
                    return NOT_COMPARISON
            if NOT_COMPARISON in verdicts and isinstance(node.op, ast.Or):
                return NOT_COMPARISON
            return COMPARES if COMPARES in verdicts else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self._verdict(node.operand, fn)
            if inner in (TRUE, FALSE):
                return FALSE if inner == TRUE else TRUE
            return COMPARES if _reads(node, fn.other_names) else UNKNOWN
        if isinstance(node, ast.IfExp):
            test = self._verdict(node.test, fn)
            if test == TRUE:
                return self._verdict(node.body, fn)
            if test == FALSE:
                return self._verdict(node.orelse, fn)
            body, orelse = self._verdict(node.body, fn), self._verdict(node.orelse, fn)
            if body == orelse:
                return body
            if NOT_COMPARISON in (body, orelse):
                return NOT_COMPARISON
            return COMPARES if _reads(node.test, fn.other_names) or COMPARES in (body, orelse) else UNKNOWN
        if isinstance(node, ast.NamedExpr):
            return self._verdict(node.value, fn)
        if isinstance(node, ast.Call):
            return self._call_verdict(node, fn)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitAnd | ast.BitOr | ast.BitXor):
                return COMPARES if _reads(node, fn.other_names) else UNKNOWN
            return NOT_COMPARISON
        return UNKNOWN

    def _call_verdict(self, node: ast.Call, fn: _Function) -> str:
        func = self.qual(node.func)
        if func == "builtins.bool" and len(node.args) == 1:
            return self._verdict(node.args[0], fn)
        if func == "builtins.isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(self.qual(k) == "builtins.object" for k in kinds):
                return TRUE
            return COMPARES
        if func == "builtins.hasattr" and len(node.args) == 2:
            if self.fold_str(node.args[1]) in ("__class__", "__eq__", "__hash__", "__doc__", "__repr__"):
                return TRUE
            return COMPARES
        if func in ("builtins.all", "builtins.any") and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.GeneratorExp | ast.ListComp | ast.SetComp):
                inner = self._verdict(arg.elt, fn)
                if inner == TRUE and func == "builtins.all":
                    return TRUE
            return COMPARES if _reads(arg, fn.other_names) else UNKNOWN
        if func in NOT_BOOLEAN:
            return NOT_COMPARISON
        return UNKNOWN
