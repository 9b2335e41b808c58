"""The mutation engine's vocabulary: the operators it knows and the mutant it hands out.

Every other module of the package names operators through :class:`MutationOperator`;
callers outside it see plain strings (``Mutant.operator``), since a combined mutant's
operator, ``"comparison_flip+arithmetic_swap"``, is no single member.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class MutationOperator(StrEnum):
    # The order matters twice: it breaks ties between mutants at the same position,
    # and when two operators produce the same text the earlier one keeps the mutant.
    COMPARISON_FLIP = "comparison_flip"
    BOOLEAN_FLIP = "boolean_flip"
    NEGATION_REMOVAL = "negation_removal"
    BOOL_CONSTANT_FLIP = "bool_constant_flip"
    ARITHMETIC_SWAP = "arithmetic_swap"
    OFF_BY_ONE = "off_by_one"
    RETURN_VALUE = "return_value"
    REMOVE_CONDITIONAL = "remove_conditional"
    REMOVE_STATEMENT = "remove_statement"
    SWAP_ARGUMENTS = "swap_arguments"
    EXCEPTION_SWALLOW = "exception_swallow"
    DEFAULT_ARGUMENT = "default_argument"
    STRING_CONSTANT = "string_constant"
    BREAK_CONTINUE_SWAP = "break_continue_swap"


OPERATORS: tuple[str, ...] = tuple(operator.value for operator in MutationOperator)

OPERATOR_RANK = {name: rank for rank, name in enumerate(OPERATORS)}


@dataclass(frozen=True)
class Mutant:
    path: str  # repo-relative file path
    operator: str  # operator name, e.g. "comparison_flip"
    description: str  # human text, e.g. "`<` became `<=` in parse_value (line 42)"
    line: int  # 1-based line of the mutated node in the ORIGINAL source
    function: str | None  # qualified name of the enclosing function/method, if any
    original: str  # the original full source
    mutated: str  # the mutated full source (differs from original and still parses)


def resolve_operators(operators: Iterable[str] | None) -> frozenset[str]:
    """The enabled operator names; ``None`` means all of them."""
    if operators is None:
        return frozenset(OPERATORS)
    chosen = frozenset(operators)
    unknown = sorted(chosen - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown mutation operators: {', '.join(unknown)}")
    return chosen
