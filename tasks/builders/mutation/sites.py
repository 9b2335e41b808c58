"""Where a module can be mutated: the libcst walk that proposes every edit.

:class:`SiteCollector` visits a module once and records a :class:`Site` per applicable
edit of each enabled operator: the node to replace, its replacement, and where it sits
(line, enclosing function, indentation). It decides *what* may change and how the change
is described; turning a site into text and checking it parses is ``splice``'s job.

One visitor on purpose: the operators share scope tracking and the skipped regions
(annotations, decorators, guards, logging calls), so splitting it would mean walking the
tree once per operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider

from tasks.builders.mutation.model import MutationOperator
from tasks.builders.mutation.nodes import (
    NodeFactory,
    assigns_dunder,
    integer_node,
    integer_value,
    is_inert_call,
    is_none,
    is_noop_statement,
    is_skipped_guard,
    is_string,
    is_type_check,
    operator_like,
)

# What each operator node may become, keyed by the node type it replaces.
_COMPARISON_FLIPS: dict[type[cst.CSTNode], tuple[NodeFactory, ...]] = {
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

_BOOLEAN_FLIPS: dict[type[cst.CSTNode], tuple[NodeFactory, ...]] = {
    cst.And: (cst.Or,),
    cst.Or: (cst.And,),
}

_ARITHMETIC_SWAPS: dict[type[cst.CSTNode], tuple[NodeFactory, ...]] = {
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

_SNIPPET_LIMIT = 60


@dataclass(frozen=True)
class Site:
    """One proposed edit of the wrapped module.

    ``old`` is replaced by ``new``; ``new`` None deletes ``old`` -- the small
    statement itself or, with ``whole_lines``, every physical line it spans.
    """

    operator: MutationOperator
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


class SiteCollector(cst.CSTVisitor):
    """Walks a module once and records every applicable edit of every enabled operator."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module, operators: frozenset[str]) -> None:
        super().__init__()
        self.module = module
        self.operators = operators
        self.sites: list[Site] = []
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
        operator: MutationOperator,
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
            Site(
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
            self._add(MutationOperator.EXCEPTION_SWALLOW, node, new, node, f"`{self._code(node)}` became `return None`")
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
        if all(is_noop_statement(statement) for statement in line.body):
            return True
        # `__all__`, `__version__` and friends at module level: metadata, not behaviour.
        return not self._scopes and any(assigns_dunder(statement) for statement in line.body)

    # ---- expression operators

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            self._swap_operator(MutationOperator.COMPARISON_FLIP, target.operator, _COMPARISON_FLIPS)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._swap_operator(MutationOperator.BOOLEAN_FLIP, node.operator, _BOOLEAN_FLIPS)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # String `+`, `*` and `%` are concatenation, repetition and formatting:
        # swapping them only produces an immediate TypeError.
        if not (is_string(node.left) or is_string(node.right)):
            self._swap_operator(MutationOperator.ARITHMETIC_SWAP, node.operator, _ARITHMETIC_SWAPS)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not is_string(node.value):
            self._swap_operator(MutationOperator.ARITHMETIC_SWAP, node.operator, _ARITHMETIC_SWAPS)

    def _swap_operator(
        self, operator: MutationOperator, node: cst.CSTNode, table: dict[type[cst.CSTNode], tuple[NodeFactory, ...]]
    ) -> None:
        for factory in table.get(type(node), ()):
            new = operator_like(factory, node)
            self._add(operator, node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            inner = node.expression
            # Keep the parentheses the `not` had, so `if(not x)` cannot become `ifx`.
            new = inner.with_changes(lpar=[*node.lpar, *inner.lpar], rpar=[*inner.rpar, *node.rpar])
            self._add(
                MutationOperator.NEGATION_REMOVAL, node, new, node, f"`{self._code(node)}` became `{self._code(new)}`"
            )
        elif isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
            value = integer_value(node.expression.value)
            if value is not None:
                # `-1` is one literal to a reader; mutate it as such, not its `1`.
                self._negative_literals.add(id(node.expression))
                self._off_by_one(node, -value, node.expression.value)

    def visit_Integer(self, node: cst.Integer) -> None:
        if id(node) in self._negative_literals or self._format_specs:
            return
        value = integer_value(node.value)
        if value is not None:
            self._off_by_one(node, value, node.value)

    def _off_by_one(self, node: cst.BaseExpression, value: int, spelling: str) -> None:
        for changed in (value + 1, value - 1):
            new = integer_node(changed, spelling).with_changes(lpar=node.lpar, rpar=node.rpar)
            self._add(MutationOperator.OFF_BY_ONE, node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_Name(self, node: cst.Name) -> None:
        flipped = {"True": "False", "False": "True"}.get(node.value)
        if flipped is not None:
            new = node.with_changes(value=flipped)
            self._add(MutationOperator.BOOL_CONSTANT_FLIP, node, new, node, f"`{node.value}` became `{flipped}`")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._quiet_strings:
            return
        prefix, quote = node.prefix, node.quote
        body = node.value[len(prefix) + len(quote) : len(node.value) - len(quote)]
        new = node.with_changes(value=f"{prefix}{quote}{'' if body else 'x'}{quote}")
        self._add(MutationOperator.STRING_CONSTANT, node, new, node, f"`{self._code(node)}` became `{self._code(new)}`")

    def visit_Call(self, node: cst.Call) -> bool:
        if is_inert_call(node):
            return False
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if len(positional) >= 2 and not is_type_check(node):
            first, second = positional[0], positional[1]
            if not first.value.deep_equals(second.value):
                swapped = {id(first): second.value, id(second): first.value}
                args = [arg.with_changes(value=swapped[id(arg)]) if id(arg) in swapped else arg for arg in node.args]
                new = node.with_changes(args=args)
                summary = (
                    f"swapped `{self._code(first.value)}` and `{self._code(second.value)}` "
                    f"in the call to `{self._code(node.func)}`"
                )
                self._add(MutationOperator.SWAP_ARGUMENTS, node, new, first.value, summary)
        return True

    def visit_Param(self, node: cst.Param) -> None:
        default = node.default
        if default is None or is_none(default):
            return
        new = cst.Name("None")
        name = node.name.value
        summary = f"default `{name}={self._code(default)}` became `{name}=None`"
        self._add(MutationOperator.DEFAULT_ARGUMENT, default, new, default, summary)

    # ---- statement operators

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is None or is_none(node.value):
            return
        # `return(x)` has no space after the keyword; `returnNone` would be a name.
        new = node.with_changes(value=cst.Name("None"), whitespace_after_return=cst.SimpleWhitespace(" "))
        self._add(
            MutationOperator.RETURN_VALUE, node, new, node, f"`return {self._code(node.value)}` became `return None`"
        )

    def visit_If(self, node: cst.If) -> bool:
        if is_skipped_guard(node.test):
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
            self._add(MutationOperator.REMOVE_CONDITIONAL, node.test, new, node.test, summary)
        return True

    def visit_Break(self, node: cst.Break) -> None:
        new = cst.Continue(semicolon=node.semicolon)
        self._add(MutationOperator.BREAK_CONTINUE_SWAP, node, new, node, "`break` became `continue`")

    def visit_Continue(self, node: cst.Continue) -> None:
        new = cst.Break(semicolon=node.semicolon)
        self._add(MutationOperator.BREAK_CONTINUE_SWAP, node, new, node, "`continue` became `break`")

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
        self._add(
            MutationOperator.REMOVE_STATEMENT, old, new, statement, f"removed `{self._code(statement)}`", whole_lines
        )

    def _removable(self, statement: cst.BaseSmallStatement) -> bool:
        if isinstance(statement, cst.Expr):
            value = statement.value
            return not is_noop_statement(statement) and not (isinstance(value, cst.Call) and is_inert_call(value))
        if isinstance(statement, cst.AnnAssign):
            return statement.value is not None  # a bare `x: int` does nothing at runtime
        return isinstance(statement, (cst.Assign, cst.AugAssign, cst.Raise, cst.Continue, cst.Break))
