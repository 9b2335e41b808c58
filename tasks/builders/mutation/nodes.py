"""Questions about libcst nodes and small node factories, shared by the site collector.

Predicates decide where a change would be unobservable or a guaranteed crash (docstrings,
``__main__`` guards, logging calls, ``isinstance``); factories build replacement nodes
that keep the original's spelling (spacing around an operator, the base of an integer).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

import libcst as cst

# A constructor of a libcst operator node. Typed as a plain callable because
# libcst's operator classes share no common __init__.
NodeFactory = Callable[..., cst.CSTNode]

# Calls whose arguments only feed logs or warnings: tests almost never observe
# a change there, so mutating them would just waste sandbox runs.
_INERT_CALL_ROOTS = frozenset({"logging", "logger", "log", "_logger", "_log", "LOGGER", "LOG", "warnings"})


def operator_like(factory: NodeFactory, old: cst.CSTNode) -> cst.CSTNode:
    """Build an operator node that keeps ``old``'s spacing, so only the symbol changes."""
    kwargs: dict[str, Any] = {
        "whitespace_before": getattr(old, "whitespace_before"),  # noqa: B009 - operators lack a common base
        "whitespace_after": getattr(old, "whitespace_after"),  # noqa: B009
    }
    if factory in (cst.IsNot, cst.NotIn):
        kwargs["whitespace_between"] = getattr(old, "whitespace_between", cst.SimpleWhitespace(" "))
    return factory(**kwargs)


def integer_value(spelling: str) -> int | None:
    try:
        return int(spelling, 0)
    except ValueError:
        return None


def integer_node(value: int, spelling: str) -> cst.BaseExpression:
    """``value`` as a literal, in the same base as ``spelling`` (hex stays hex)."""
    prefix = spelling[:2]
    base = {"0x": "x", "0o": "o", "0b": "b"}.get(prefix.lower())
    magnitude = abs(value)
    text = prefix + format(magnitude, base) if base else str(magnitude)
    literal = cst.Integer(text)
    return cst.UnaryOperation(operator=cst.Minus(), expression=literal) if value < 0 else literal


def is_string(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def is_noop_statement(statement: cst.BaseSmallStatement) -> bool:
    """Docstrings, bare strings and `...`: statements with no runtime effect."""
    if isinstance(statement, cst.Pass):
        return True
    return isinstance(statement, cst.Expr) and (is_string(statement.value) or isinstance(statement.value, cst.Ellipsis))


def _is_dunder(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Name) and len(node.value) > 4 and node.value.startswith("__") and node.value.endswith("__")
    )


def assigns_dunder(statement: cst.BaseSmallStatement) -> bool:
    if isinstance(statement, cst.Assign):
        return any(_is_dunder(target.target) for target in statement.targets)
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        return _is_dunder(statement.target)
    return False


def is_skipped_guard(test: cst.BaseExpression) -> bool:
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


def is_type_check(call: cst.Call) -> bool:
    """`isinstance(dict, x)` is a TypeError on every call: a crash, not a plausible bug."""
    return isinstance(call.func, cst.Name) and call.func.value in ("isinstance", "issubclass")


def is_inert_call(call: cst.Call) -> bool:
    names: list[str] = []
    func: cst.BaseExpression = call.func
    while isinstance(func, cst.Attribute):
        names.append(func.attr.value)
        func = func.value
    if isinstance(func, cst.Name):
        names.append(func.value)
    # The final attribute is the method (`info`, `warn`); the receiver names the logger.
    return any(name in _INERT_CALL_ROOTS for name in names[1:])


def is_reexport_init(path: str, module: cst.Module) -> bool:
    """An ``__init__.py`` that only imports, documents and sets dunders has nothing to break."""
    if PurePosixPath(path).name != "__init__.py":
        return False
    for statement in module.body:
        if isinstance(statement, cst.If) and is_skipped_guard(statement.test):
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if not (
                isinstance(small, (cst.Import, cst.ImportFrom)) or is_noop_statement(small) or assigns_dunder(small)
            ):
                return False
    return True
