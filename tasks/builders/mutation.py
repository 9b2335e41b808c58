"""Propose single-change mutants of Python source for synthetic bug injection.

Each mutant changes exactly one node of one file. This module only proposes
mutants; a later step runs the tests against each one and keeps those the
tests detect, so the operators favour plausible bugs over exhaustiveness and
skip places where a change is almost never observable (docstrings, type
annotations, ``__main__`` guards, logging calls).

Plain Python on purpose: no Django, so it can run inside a sandbox or a worker.
"""

from __future__ import annotations

import os
import random
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider


@dataclass(frozen=True)
class Mutant:
    path: str  # repo-relative file path
    operator: str  # operator name, e.g. "comparison_flip"
    description: str  # human text, e.g. "`<` became `<=` in parse_value (line 42)"
    line: int  # 1-based line of the mutated node in the ORIGINAL source
    function: str | None  # qualified name of the enclosing function/method, if any
    original: str  # the original full source
    mutated: str  # the mutated full source (differs from original and still parses)


# The order matters twice: it breaks ties between mutants at the same position,
# and when two operators produce the same text the earlier one keeps the mutant.
OPERATORS: tuple[str, ...] = (
    "comparison_flip",
    "boolean_flip",
    "negation_removal",
    "bool_constant_flip",
    "arithmetic_swap",
    "off_by_one",
    "return_value",
    "remove_conditional",
    "remove_statement",
    "swap_arguments",
    "exception_swallow",
    "default_argument",
    "string_constant",
    "break_continue_swap",
)

_OPERATOR_RANK = {name: rank for rank, name in enumerate(OPERATORS)}

# Operator node constructors keyed by the node type they replace. Typed as
# plain callables because libcst's operator classes share no common __init__.
_NodeFactory = Callable[..., cst.CSTNode]

_COMPARISON_FLIPS: dict[type[cst.CSTNode], tuple[_NodeFactory, ...]] = {
    cst.LessThan: (cst.LessThanEqual, cst.GreaterThan),
    cst.LessThanEqual: (cst.LessThan,),
    cst.GreaterThan: (cst.GreaterThanEqual, cst.LessThan),
    cst.GreaterThanEqual: (cst.GreaterThan,),
    cst.Equal: (cst.NotEqual,),
    cst.NotEqual: (cst.Equal,),
    cst.Is: (cst.IsNot,),
    cst.IsNot: (cst.Is,),
    cst.In: (cst.NotIn,),
    cst.NotIn: (cst.In,),
}

_BOOLEAN_FLIPS: dict[type[cst.CSTNode], tuple[_NodeFactory, ...]] = {
    cst.And: (cst.Or,),
    cst.Or: (cst.And,),
}

_ARITHMETIC_SWAPS: dict[type[cst.CSTNode], tuple[_NodeFactory, ...]] = {
    cst.Add: (cst.Subtract,),
    cst.Subtract: (cst.Add,),
    cst.Multiply: (cst.Divide,),
    cst.Divide: (cst.Multiply, cst.FloorDivide),
    cst.FloorDivide: (cst.Divide,),
    cst.Modulo: (cst.FloorDivide,),
    cst.AddAssign: (cst.SubtractAssign,),
    cst.SubtractAssign: (cst.AddAssign,),
    cst.MultiplyAssign: (cst.DivideAssign,),
    cst.DivideAssign: (cst.MultiplyAssign, cst.FloorDivideAssign),
    cst.FloorDivideAssign: (cst.DivideAssign,),
    cst.ModuloAssign: (cst.FloorDivideAssign,),
}

# Calls whose arguments only feed logs or warnings: tests almost never observe
# a change there, so mutating them would just waste sandbox runs.
_INERT_CALL_ROOTS = frozenset({"logging", "logger", "log", "_logger", "_log", "LOGGER", "LOG", "warnings"})

_SNIPPET_LIMIT = 60


@dataclass(frozen=True)
class _Site:
    """One proposed edit of the wrapped module.

    ``old`` is replaced by ``new``; ``new`` None deletes ``old`` -- the small
    statement itself or, with ``whole_lines``, every physical line it spans.
    """

    operator: str
    old: cst.CSTNode
    new: cst.CSTNode | None
    whole_lines: bool
    indent: tuple[str, ...]  # indentation of the enclosing blocks, outermost first
    unit: cst.FunctionDef | None  # innermost enclosing def: the smallest text worth re-parsing
    line: int
    column: int
    function: str | None
    where: str
    summary: str
    order: int


# --------------------------------------------------------------------------- public API


def mutants_for_source(source: str, path: str, operators: Iterable[str] | None = None) -> list[Mutant]:
    """Every single-node mutant of ``source``, in source order, without duplicates.

    Raises ``libcst.ParserSyntaxError`` when ``source`` does not parse.
    """
    enabled = _resolve_operators(operators)
    module = cst.parse_module(source)
    if _is_reexport_init(path, module):
        return []
    wrapper = MetadataWrapper(module)
    collector = _SiteCollector(wrapper.module, enabled)
    wrapper.visit(collector)
    splicer = _Splicer(wrapper)

    checker = _SyntaxChecker(splicer, path)
    seen = {source}
    mutants: list[Mutant] = []
    for site in sorted(collector.sites, key=_site_key):
        mutated = splicer.apply(site)
        if mutated is None or mutated in seen or not checker.accepts(site, mutated):
            continue
        seen.add(mutated)
        mutants.append(
            Mutant(
                path=path,
                operator=site.operator,
                description=f"{site.summary} {site.where} (line {site.line})",
                line=site.line,
                function=site.function,
                original=source,
                mutated=mutated,
            )
        )
    return mutants


def default_include(path: str) -> bool:
    """Whether a repo-relative path is library code worth mutating (not tests or packaging)."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if any(part in ("tests", "test") for part in parts[:-1]):
        return False
    if name.startswith("test_") or name.endswith("_test.py"):
        return False
    return name not in ("conftest.py", "setup.py")


def mutants_for_repo(
    root: Path,
    include: Callable[[str], bool] | None = None,
    operators: Iterable[str] | None = None,
) -> list[Mutant]:
    """Mutants of every included ``*.py`` file under ``root``, files in path order.

    ``include`` receives the repo-relative POSIX path; it defaults to
    :func:`default_include`. Files that are not UTF-8 or do not parse are skipped.
    """
    enabled = _resolve_operators(operators)
    keep = include or default_include
    mutants: list[Mutant] = []
    for relative in _python_files(root):
        if not keep(relative):
            continue
        try:
            # Bytes, not read_text: universal newlines would turn a CRLF file
            # into a whole-file diff once the mutant is written back.
            source = (root / relative).read_bytes().decode("utf-8")
            mutants.extend(mutants_for_source(source, relative, enabled))
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
            continue
    return mutants


def sample_mutants(mutants: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """Pick ``count`` mutants, deterministically for a seed, spread over files then operators.

    Files take turns (so one big module cannot crowd out the rest) and, inside a
    file, operators take turns; which mutant a turn yields is chosen by ``seed``.
    The input order does not matter.
    """
    if count <= 0:
        return []
    rng = random.Random(seed)
    by_file: dict[str, dict[str, list[Mutant]]] = {}
    for mutant in sorted(mutants, key=_mutant_key):
        by_file.setdefault(mutant.path, {}).setdefault(mutant.operator, []).append(mutant)

    per_file: list[list[Mutant]] = []
    for path in sorted(by_file):
        buckets = [by_file[path][operator] for operator in sorted(by_file[path])]
        for bucket in buckets:
            rng.shuffle(bucket)
        rng.shuffle(buckets)
        per_file.append(_round_robin(buckets))
    rng.shuffle(per_file)
    return _round_robin(per_file)[:count]


def combine(a: Mutant, b: Mutant) -> Mutant | None:
    """One mutant carrying both changes, or None when they touch the same text.

    Mutants of different files (or of different originals) also give None; the
    caller handles multi-file bugs. The result is the same whichever order the
    two are passed in: the change that comes first in the file comes first.
    """
    if a.path != b.path or a.original != b.original or a.mutated == b.mutated:
        return None
    first, second = sorted((a, b), key=lambda mutant: _change_span(mutant)[0])
    start1, end1, text1 = _change_span(first)
    start2, end2, text2 = _change_span(second)
    # Strict inequality: two edits that merely touch could be one edit seen twice
    # (an insertion right at the other's boundary), and then the order is ambiguous.
    if end1 >= start2:
        return None
    original = a.original
    mutated = original[:start1] + text1 + original[end1:start2] + text2 + original[end2:]
    if mutated in (original, a.mutated, b.mutated):
        return None
    if not _parses(mutated, a.path, _compiles(original, a.path)):
        return None
    return Mutant(
        path=a.path,
        operator=f"{first.operator}+{second.operator}",
        description=f"{first.description}; {second.description}",
        line=first.line,
        function=first.function,
        original=original,
        mutated=mutated,
    )


# --------------------------------------------------------------------------- collecting sites


class _SiteCollector(cst.CSTVisitor):
    """Walks a module once and records every applicable edit of every enabled operator."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module, operators: frozenset[str]) -> None:
        super().__init__()
        self.module = module
        self.operators = operators
        self.sites: list[_Site] = []
        self._scopes: list[tuple[str, str]] = []  # ("def" | "class", name), outermost first
        self._quiet_strings = 0  # inside a raise or an assert message: wording rarely matters
        self._format_specs = 0  # inside an f-string format spec such as `{x:>10}`
        self._negative_literals: set[int] = set()  # Integer nodes already handled as `-n`
        self._elifs: set[int] = set()
        self._indent: list[str] = []
        self._defs: list[cst.FunctionDef] = []

    # ---- bookkeeping

    def _add(
        self,
        operator: str,
        old: cst.CSTNode,
        new: cst.CSTNode | None,
        anchor: cst.CSTNode,
        summary: str,
        whole_lines: bool = False,
    ) -> None:
        if operator not in self.operators:
            return
        start = self.get_metadata(PositionProvider, anchor).start
        self.sites.append(
            _Site(
                operator=operator,
                old=old,
                new=new,
                whole_lines=whole_lines,
                indent=tuple(self._indent),
                unit=self._defs[-1] if self._defs else None,
                line=start.line,
                column=start.column,
                function=self._function(),
                where=self._where(),
                summary=summary,
                order=len(self.sites),
            )
        )

    def _function(self) -> str | None:
        innermost_def = max((i for i, (kind, _) in enumerate(self._scopes) if kind == "def"), default=-1)
        if innermost_def < 0:
            return None
        return ".".join(name for _, name in self._scopes[: innermost_def + 1])

    def _where(self) -> str:
        function = self._function()
        if function is not None:
            return f"in {function}"
        if self._scopes:
            return "in class " + ".".join(name for _, name in self._scopes)
        return "at module level"

    def _code(self, node: cst.CSTNode) -> str:
        text = " ".join(self.module.code_for_node(node).split()).rstrip(";").strip()
        return text if len(text) <= _SNIPPET_LIMIT else text[: _SNIPPET_LIMIT - 3] + "..."

    def _in_function(self) -> bool:
        return bool(self._scopes) and self._scopes[-1][0] == "def"

    # ---- scopes and skipped regions

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._scopes.append(("def", node.name.value))
        self._defs.append(node)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()
        self._defs.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._scopes.append(("class", node.name.value))
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def visit_Decorator(self, node: cst.Decorator) -> bool:
        # Decorator arguments are configuration (cache sizes, routes); a change
        # there is seldom a bug a unit test owns.
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return not self._is_inert_line(node)

    def visit_Raise(self, node: cst.Raise) -> bool:
        self._quiet_strings += 1
        if self._in_function():
            new = cst.Return(value=cst.Name("None"), semicolon=node.semicolon)
            self._add("exception_swallow", node, new, node, f"`{self._code(node)}` became `return None`")
        return True

    def leave_Raise(self, original_node: cst.Raise) -> None:
        self._quiet_strings -= 1

    def visit_Assert_msg(self, node: cst.Assert) -> None:
        self._quiet_strings += 1

    def leave_Assert_msg(self, node: cst.Assert) -> None:
        self._quiet_strings -= 1

    def visit_FormattedStringExpression_format_spec(self, node: cst.FormattedStringExpression) -> None:
        self._format_specs += 1

    def leave_FormattedStringExpression_format_spec(self, node: cst.FormattedStringExpression) -> None:
        self._format_specs -= 1

    def _is_inert_line(self, line: cst.SimpleStatementLine) -> bool:
        if all(_is_noop_statement(statement) for statement in line.body):
            return True
        # `__all__`, `__version__` and friends at module level: metadata, not behaviour.
        return not self._scopes and any(_assigns_dunder(statement) for statement in line.body)

    # ---- expression operators

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            self._swap_operator("comparison_flip", target.operator, _COMPARISON_FLIPS)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._swap_operator("boolean_flip", node.operator, _BOOLEAN_FLIPS)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # String `+`, `*` and `%` are concatenation, repetition and formatting:
        # swapping them only produces an immediate TypeError.
        if not (_is_string(node.left) or _is_string(node.right)):
            self._swap_operator("arithmetic_swap", node.operator, _ARITHMETIC_SWAPS)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not _is_string(node.value):
            self._swap_operator("arithmetic_swap", node.operator, _ARITHMETIC_SWAPS)

    def _swap_operator(
        self, operator: str, node: cst.CSTNode, table: dict[type[cst.CSTNode], tuple[_NodeFactory, ...]]
    ) -> None:
        for factory in table.get(type(node), ()):
            new = _operator_like(factory, node)
            self._add(operator, node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            inner = node.expression
            # Keep the parentheses the `not` had, so `if(not x)` cannot become `ifx`.
            new = inner.with_changes(lpar=[*node.lpar, *inner.lpar], rpar=[*inner.rpar, *node.rpar])
            self._add("negation_removal", node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")
        elif isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
            value = _integer_value(node.expression.value)
            if value is not None:
                # `-1` is one literal to a reader; mutate it as such, not its `1`.
                self._negative_literals.add(id(node.expression))
                self._off_by_one(node, -value, node.expression.value)

    def visit_Integer(self, node: cst.Integer) -> None:
        if id(node) in self._negative_literals or self._format_specs:
            return
        value = _integer_value(node.value)
        if value is not None:
            self._off_by_one(node, value, node.value)

    def _off_by_one(self, node: cst.BaseExpression, value: int, spelling: str) -> None:
        for changed in (value + 1, value - 1):
            new = _integer_node(changed, spelling).with_changes(lpar=node.lpar, rpar=node.rpar)
            self._add("off_by_one", node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_Name(self, node: cst.Name) -> None:
        flipped = {"True": "False", "False": "True"}.get(node.value)
        if flipped is not None:
            new = node.with_changes(value=flipped)
            self._add("bool_constant_flip", node, new, node, f"`{node.value}` became `{flipped}`")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._quiet_strings:
            return
        prefix, quote = node.prefix, node.quote
        body = node.value[len(prefix) + len(quote) : len(node.value) - len(quote)]
        new = node.with_changes(value=f"{prefix}{quote}{'' if body else 'x'}{quote}")
        self._add("string_constant", node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_Call(self, node: cst.Call) -> bool:
        if _is_inert_call(node):
            return False
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if len(positional) >= 2 and not _is_type_check(node):
            first, second = positional[0], positional[1]
            if not first.value.deep_equals(second.value):
                swapped = {id(first): second.value, id(second): first.value}
                args = [arg.with_changes(value=swapped[id(arg)]) if id(arg) in swapped else arg for arg in node.args]
                new = node.with_changes(args=args)
                summary = (
                    f"swapped `{self._code(first.value)}` and `{self._code(second.value)}` "
                    f"in the call to `{self._code(node.func)}`"
                )
                self._add("swap_arguments", node, new, first.value, summary)
        return True

    def visit_Param(self, node: cst.Param) -> None:
        default = node.default
        if default is None or _is_none(default):
            return
        new = cst.Name("None")
        name = node.name.value
        summary = f"default `{name}={self._code(default)}` became `{name}=None`"
        self._add("default_argument", default, new, default, summary)

    # ---- statement operators

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is None or _is_none(node.value):
            return
        # `return(x)` has no space after the keyword; `returnNone` would be a name.
        new = node.with_changes(value=cst.Name("None"), whitespace_after_return=cst.SimpleWhitespace(" "))
        self._add("return_value", node, new, node, f"`return {self._code(node.value)}` became `return None`")

    def visit_If(self, node: cst.If) -> bool:
        if _is_skipped_guard(node.test):
            return False
        if isinstance(node.orelse, cst.If):
            self._elifs.add(id(node.orelse))
        keyword = "elif" if id(node) in self._elifs else "if"
        # `if(x):` has no space after the keyword; its parentheses must stay or it reads `ifTrue`.
        keep_parens = not node.whitespace_before_test.value
        for constant in ("True", "False"):
            if isinstance(node.test, cst.Name) and node.test.value == constant:
                continue
            new = cst.Name(constant)
            if keep_parens:
                new = new.with_changes(lpar=node.test.lpar, rpar=node.test.rpar)
            summary = f"`{keyword} {self._code(node.test)}:` became `{keyword} {constant}:`"
            self._add("remove_conditional", node.test, new, node.test, summary)
        return True

    def visit_Break(self, node: cst.Break) -> None:
        self._add("break_continue_swap", node, cst.Continue(semicolon=node.semicolon), node, "`break` became `continue`")

    def visit_Continue(self, node: cst.Continue) -> None:
        self._add("break_continue_swap", node, cst.Break(semicolon=node.semicolon), node, "`continue` became `break`")

    def visit_Module(self, node: cst.Module) -> None:
        self._collect_removals(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._indent.append(self.module.default_indent if node.indent is None else node.indent)
        self._collect_removals(node.body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._indent.pop()

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        # `if x: a = 1; b = 2` -- the statements live on the header line.
        for statement in node.body:
            if self._removable(statement):
                self._add_removal(statement, None if len(node.body) > 1 else cst.Pass(), statement)

    def _collect_removals(self, body: Sequence[cst.BaseStatement]) -> None:
        for line in body:
            if not isinstance(line, cst.SimpleStatementLine) or self._is_inert_line(line):
                continue
            for statement in line.body:
                if not self._removable(statement):
                    continue
                if len(line.body) > 1:
                    self._add_removal(statement, None, statement)
                elif len(body) > 1 or not self._indent:
                    self._add_removal(line, None, statement, whole_lines=True)
                else:
                    # A block cannot be empty.
                    self._add_removal(statement, cst.Pass(), statement)

    def _add_removal(
        self, old: cst.CSTNode, new: cst.CSTNode | None, statement: cst.BaseSmallStatement, whole_lines: bool = False
    ) -> None:
        self._add("remove_statement", old, new, statement, f"removed `{self._code(statement)}`", whole_lines)

    def _removable(self, statement: cst.BaseSmallStatement) -> bool:
        if isinstance(statement, cst.Expr):
            value = statement.value
            return not _is_noop_statement(statement) and not (isinstance(value, cst.Call) and _is_inert_call(value))
        if isinstance(statement, cst.AnnAssign):
            return statement.value is not None  # a bare `x: int` does nothing at runtime
        return isinstance(statement, (cst.Assign, cst.AugAssign, cst.Raise, cst.Continue, cst.Break))


# --------------------------------------------------------------------------- node helpers


def _operator_like(factory: _NodeFactory, old: cst.CSTNode) -> cst.CSTNode:
    """Build an operator node that keeps ``old``'s spacing, so only the symbol changes."""
    kwargs: dict[str, Any] = {
        "whitespace_before": getattr(old, "whitespace_before"),  # noqa: B009 - operators lack a common base
        "whitespace_after": getattr(old, "whitespace_after"),  # noqa: B009
    }
    if factory in (cst.IsNot, cst.NotIn):
        kwargs["whitespace_between"] = getattr(old, "whitespace_between", cst.SimpleWhitespace(" "))
    return factory(**kwargs)


def _integer_value(spelling: str) -> int | None:
    try:
        return int(spelling, 0)
    except ValueError:
        return None


def _integer_node(value: int, spelling: str) -> cst.BaseExpression:
    """``value`` as a literal, in the same base as ``spelling`` (hex stays hex)."""
    prefix = spelling[:2]
    base = {"0x": "x", "0o": "o", "0b": "b"}.get(prefix.lower())
    magnitude = abs(value)
    text = prefix + format(magnitude, base) if base else str(magnitude)
    literal = cst.Integer(text)
    return cst.UnaryOperation(operator=cst.Minus(), expression=literal) if value < 0 else literal


def _is_string(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_noop_statement(statement: cst.BaseSmallStatement) -> bool:
    """Docstrings, bare strings and `...`: statements with no runtime effect."""
    if isinstance(statement, cst.Pass):
        return True
    return isinstance(statement, cst.Expr) and (_is_string(statement.value) or isinstance(statement.value, cst.Ellipsis))


def _is_dunder(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and len(node.value) > 4 and node.value.startswith("__") and node.value.endswith("__")


def _assigns_dunder(statement: cst.BaseSmallStatement) -> bool:
    if isinstance(statement, cst.Assign):
        return any(_is_dunder(target.target) for target in statement.targets)
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        return _is_dunder(statement.target)
    return False


def _is_skipped_guard(test: cst.BaseExpression) -> bool:
    """`if __name__ == "__main__":` and `if TYPE_CHECKING:` guard code tests never run."""
    if isinstance(test, cst.Name) and test.value == "TYPE_CHECKING":
        return True
    if isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING":
        return True
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        sides = [test.left, test.comparisons[0].comparator]
        has_name = any(isinstance(side, cst.Name) and side.value == "__name__" for side in sides)
        has_main = any(isinstance(side, cst.SimpleString) and side.evaluated_value == "__main__" for side in sides)
        return has_name and has_main
    return False


def _is_type_check(call: cst.Call) -> bool:
    """`isinstance(dict, x)` is a TypeError on every call: a crash, not a plausible bug."""
    return isinstance(call.func, cst.Name) and call.func.value in ("isinstance", "issubclass")


def _is_inert_call(call: cst.Call) -> bool:
    names: list[str] = []
    func: cst.BaseExpression = call.func
    while isinstance(func, cst.Attribute):
        names.append(func.attr.value)
        func = func.value
    if isinstance(func, cst.Name):
        names.append(func.value)
    # The final attribute is the method (`info`, `warn`); the receiver names the logger.
    return any(name in _INERT_CALL_ROOTS for name in names[1:])


def _is_reexport_init(path: str, module: cst.Module) -> bool:
    """An ``__init__.py`` that only imports, documents and sets dunders has nothing to break."""
    if PurePosixPath(path).name != "__init__.py":
        return False
    for statement in module.body:
        if isinstance(statement, cst.If) and _is_skipped_guard(statement.test):
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if not (isinstance(small, (cst.Import, cst.ImportFrom)) or _is_noop_statement(small) or _assigns_dunder(small)):
                return False
    return True


# --------------------------------------------------------------------------- applying and checking


class _Splicer:
    """Turns a site into mutated text by rewriting only the old node's characters.

    Regenerating the whole module per mutant (``deep_replace(...).code``) costs
    O(file size) each, which makes big files quadratic; splicing is linear in
    the edit. The old node is re-rendered first and must reproduce the source
    exactly, otherwise the site falls back to the whole-module path.
    """

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.module = wrapper.module
        self.text = wrapper.module.code
        self.inclusive = wrapper.resolve(WhitespaceInclusivePositionProvider)
        self.syntactic = wrapper.resolve(PositionProvider)
        self.line_starts = [0] + [match.end() for match in re.finditer(r"\r\n|\r|\n", self.text)]

    def apply(self, site: _Site) -> str | None:
        if site.whole_lines:
            start, end = self.lines_of(site.old)
            return self.text[:start] + self.text[end:]
        span = self.inclusive[site.old]
        start = self._offset(span.start.line, span.start.column)
        end = self._offset(span.end.line, span.end.column)
        if _render(self.module, site.old, site.indent) != self.text[start:end]:
            return self._regenerate(site)
        replacement = "" if site.new is None else _render(self.module, site.new, site.indent)
        return self.text[:start] + replacement + self.text[end:]

    def _offset(self, line: int, column: int) -> int:
        return self.line_starts[line - 1] + column

    def lines_of(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the whole physical lines ``node`` spans: [start, end)."""
        span = self.syntactic[node]
        start = self.line_starts[span.start.line - 1]
        end = self.line_starts[span.end.line] if span.end.line < len(self.line_starts) else len(self.text)
        return start, end

    def _regenerate(self, site: _Site) -> str | None:
        if site.new is None:
            return None  # never seen in practice; dropping one mutant beats guessing
        regenerated = self.module.deep_replace(site.old, site.new)
        return regenerated.code if isinstance(regenerated, cst.Module) else None


def _render(module: cst.Module, node: cst.CSTNode, indent: Sequence[str]) -> str:
    """Code for ``node`` as it would print inside blocks indented by ``indent``.

    ``Module.code_for_node`` renders at column zero, which is wrong for nodes
    that span lines inside brackets (continuation lines carry the block indent).
    """
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indent),
    )
    node._codegen(state)
    return "".join(state.tokens)


class _SyntaxChecker:
    """Decides whether a mutated file still parses, re-parsing as little as it can.

    Parsing the whole file per mutant dominates the cost on big files, so a
    mutant inside a function is checked by compiling just that function (as the
    body of an ``if 1:`` when it is indented). That is only trusted when the
    untouched function compiles on its own; otherwise (say it uses ``nonlocal``)
    the whole file is compiled.

    The real compiler is used whenever the original compiles under this
    interpreter: it also rejects what libcst's grammar allows, such as
    ``return None`` inside an async generator.
    """

    def __init__(self, splicer: _Splicer, path: str) -> None:
        self.splicer = splicer
        self.path = path
        self.strict = _compiles(splicer.text, path)
        self._standalone: dict[int, bool] = {}

    def accepts(self, site: _Site, mutated: str) -> bool:
        if site.unit is not None:
            start, end = self.splicer.lines_of(site.unit)
            if self._compiles_alone(site.unit, self.splicer.text[start:end]):
                grown = len(mutated) - len(self.splicer.text)
                return _parses(_as_block(mutated[start : end + grown]), self.path, self.strict)
        return _parses(mutated, self.path, self.strict)

    def _compiles_alone(self, unit: cst.FunctionDef, text: str) -> bool:
        if id(unit) not in self._standalone:
            self._standalone[id(unit)] = _parses(_as_block(text), self.path, self.strict)
        return self._standalone[id(unit)]


def _as_block(snippet: str) -> str:
    return "if 1:\n" + snippet if snippet[:1] in (" ", "\t") else snippet


def _compiles(source: str, path: str) -> bool:
    with warnings.catch_warnings():
        # `x is 1` style SyntaxWarnings are noise here; only errors matter.
        warnings.simplefilter("ignore")
        try:
            compile(source, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def _parses(source: str, path: str, strict: bool) -> bool:
    """With ``strict`` use the running interpreter; otherwise (the original uses
    syntax this interpreter lacks) settle for libcst's grammar."""
    if strict:
        return _compiles(source, path)
    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError:
        return False
    return True


def _resolve_operators(operators: Iterable[str] | None) -> frozenset[str]:
    if operators is None:
        return frozenset(OPERATORS)
    chosen = frozenset(operators)
    unknown = sorted(chosen - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown mutation operators: {', '.join(unknown)}")
    return chosen


def _site_key(site: _Site) -> tuple[int, int, int, int]:
    return (site.line, site.column, _OPERATOR_RANK[site.operator], site.order)


def _mutant_key(mutant: Mutant) -> tuple[str, int, str, str]:
    return (mutant.path, mutant.line, mutant.operator, mutant.mutated)


def _change_span(mutant: Mutant) -> tuple[int, int, str]:
    """The one region of ``original`` the mutant rewrote: (start, end, replacement)."""
    original, mutated = mutant.original, mutant.mutated
    limit = min(len(original), len(mutated))
    prefix = 0
    while prefix < limit and original[prefix] == mutated[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and original[-1 - suffix] == mutated[-1 - suffix]:
        suffix += 1
    return prefix, len(original) - suffix, mutated[prefix : len(mutated) - suffix]


def _round_robin(queues: list[list[Mutant]]) -> list[Mutant]:
    longest = max((len(queue) for queue in queues), default=0)
    return [queue[turn] for turn in range(longest) for queue in queues if turn < len(queue)]


def _python_files(root: Path) -> list[str]:
    """Repo-relative POSIX paths of ``*.py`` files, sorted, skipping VCS, caches and virtualenvs."""
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in ("__pycache__", "node_modules", "site-packages")
            and not (Path(directory) / name / "pyvenv.cfg").exists()
        )
        relative_dir = Path(directory).relative_to(root)
        found.extend((relative_dir / name).as_posix() for name in files if name.endswith(".py"))
    return sorted(found)
