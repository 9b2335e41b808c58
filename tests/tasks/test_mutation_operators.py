"""Mutation operators for synthetic bug injection: one change at one node, exact text, right place."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from textwrap import dedent

import pytest

from tasks.builders.mutation import (
    OPERATORS,
    Mutant,
    combine,
    mutants_for_repo,
    mutants_for_source,
    sample_mutants,
)

CONFIGKIT = Path(__file__).resolve().parents[2] / "demo" / "tasks" / "task_0001" / "repo_snapshot"


def mutate(source: str, *operators: str) -> list[Mutant]:
    return mutants_for_source(dedent(source), "pkg/mod.py", operators or None)


def texts(mutants: list[Mutant]) -> list[str]:
    return [mutant.mutated for mutant in mutants]


# --------------------------------------------------------------------------- one test per operator


def test_it_flips_a_comparison() -> None:
    mutants = mutate(
        """\
        def clamp(value, limit):
            if value < limit:
                return value
            return limit
        """,
        "comparison_flip",
    )
    assert texts(mutants) == [
        "def clamp(value, limit):\n    if value <= limit:\n        return value\n    return limit\n",
        "def clamp(value, limit):\n    if value > limit:\n        return value\n    return limit\n",
    ]
    assert {(mutant.line, mutant.function) for mutant in mutants} == {(2, "clamp")}
    assert mutants[0].description == "`<` became `<=` in clamp (line 2)"


def test_it_flips_identity_and_membership_comparisons() -> None:
    mutants = mutate("def f(x, y):\n    return x is None and y not in x\n", "comparison_flip")
    assert texts(mutants) == [
        "def f(x, y):\n    return x is not None and y not in x\n",
        "def f(x, y):\n    return x is None and y in x\n",
    ]


def test_it_flips_a_boolean_operator() -> None:
    mutants = mutate("def both(a, b):\n    return a and b\n", "boolean_flip")
    assert texts(mutants) == ["def both(a, b):\n    return a or b\n"]
    assert (mutants[0].line, mutants[0].function) == (2, "both")


def test_it_removes_a_negation_and_keeps_its_parentheses() -> None:
    mutants = mutate("def f(ready):\n    if not ready:\n        return(not ready)\n", "negation_removal")
    assert texts(mutants) == [
        "def f(ready):\n    if ready:\n        return(not ready)\n",
        "def f(ready):\n    if not ready:\n        return(ready)\n",
    ]
    assert [mutant.line for mutant in mutants] == [2, 3]


def test_it_flips_a_boolean_constant() -> None:
    mutants = mutate("def enabled():\n    return True\n", "bool_constant_flip")
    assert texts(mutants) == ["def enabled():\n    return False\n"]


def test_it_swaps_arithmetic_operators_but_not_string_concatenation() -> None:
    source = """\
        def f(a, b):
            total = a + b
            total += a / b
            return total % b, "x" + a
        """
    assert texts(mutate(source, "arithmetic_swap")) == [
        dedent(source).replace("a + b", "a - b"),
        dedent(source).replace("+=", "-="),
        dedent(source).replace("a / b", "a * b"),
        dedent(source).replace("a / b", "a // b"),
        dedent(source).replace("total % b", "total // b"),
    ]


def test_it_moves_integer_literals_and_slice_bounds_by_one() -> None:
    source = "def f(items):\n    return items[1:-1]\n"
    assert texts(mutate(source, "off_by_one")) == [
        "def f(items):\n    return items[2:-1]\n",
        "def f(items):\n    return items[0:-1]\n",
        "def f(items):\n    return items[1:0]\n",
        "def f(items):\n    return items[1:-2]\n",
    ]


def test_it_leaves_integers_in_format_specs_alone() -> None:
    assert mutate('def f(x):\n    return f"{x:>10}"\n', "off_by_one") == []


def test_it_replaces_a_return_value_with_none() -> None:
    mutants = mutate("def f(x):\n    if x:\n        return(x)\n    return None\n", "return_value")
    assert texts(mutants) == ["def f(x):\n    if x:\n        return None\n    return None\n"]
    assert (mutants[0].line, mutants[0].function) == (3, "f")


def test_it_forces_if_and_elif_tests_both_ways() -> None:
    source = """\
        def sign(n):
            if n > 0:
                return 1
            elif n < 0:
                return -1
            return 0
        """
    mutants = mutate(source, "remove_conditional")
    assert texts(mutants) == [
        dedent(source).replace("if n > 0", "if True"),
        dedent(source).replace("if n > 0", "if False"),
        dedent(source).replace("elif n < 0", "elif True"),
        dedent(source).replace("elif n < 0", "elif False"),
    ]
    assert [mutant.line for mutant in mutants] == [2, 2, 4, 4]
    assert mutants[2].description == "`elif n < 0:` became `elif True:` in sign (line 4)"


def test_it_keeps_the_parentheses_of_an_if_without_a_space() -> None:
    mutants = mutate("def f(x):\n    if(x):\n        return 1\n", "remove_conditional")
    assert texts(mutants) == [
        "def f(x):\n    if(True):\n        return 1\n",
        "def f(x):\n    if(False):\n        return 1\n",
    ]


def test_it_removes_a_statement_line_and_keeps_the_comment_above_it() -> None:
    source = """\
        def f(items):
            # Keep the input intact.
            items = list(items)
            items.sort()
            return items
        """
    mutants = mutate(source, "remove_statement")
    assert texts(mutants) == [
        "def f(items):\n    # Keep the input intact.\n    items.sort()\n    return items\n",
        "def f(items):\n    # Keep the input intact.\n    items = list(items)\n    return items\n",
    ]
    assert [(mutant.line, mutant.function) for mutant in mutants] == [(3, "f"), (4, "f")]
    assert mutants[1].description == "removed `items.sort()` in f (line 4)"


def test_it_removes_a_whole_multi_line_statement() -> None:
    source = "def f():\n    x = [\n        1,\n    ]\n    return x\n"
    mutants = mutate(source, "remove_statement")
    assert texts(mutants) == ["def f():\n    return x\n"]


def test_it_replaces_the_only_statement_of_a_block_with_pass() -> None:
    source = "def f(x):\n    for item in x:\n        continue  # skip\n    raise ValueError(x)\n"
    assert texts(mutate(source, "remove_statement")) == [
        "def f(x):\n    for item in x:\n        pass  # skip\n    raise ValueError(x)\n",
        "def f(x):\n    for item in x:\n        continue  # skip\n",
    ]


def test_it_removes_one_of_several_statements_on_a_line() -> None:
    source = "def f():\n    a = 1; b = 2\n    if a: b = 3\n    return b\n"
    assert texts(mutate(source, "remove_statement")) == [
        "def f():\n    b = 2\n    if a: b = 3\n    return b\n",
        "def f():\n    a = 1; \n    if a: b = 3\n    return b\n",
        "def f():\n    a = 1; b = 2\n    if a: pass\n    return b\n",
    ]


def test_it_swaps_the_first_two_positional_arguments() -> None:
    source = "def f(a, b, c):\n    return divmod(a, b), g(a, b, key=c), isinstance(a, int)\n"
    assert texts(mutate(source, "swap_arguments")) == [
        "def f(a, b, c):\n    return divmod(b, a), g(a, b, key=c), isinstance(a, int)\n",
        "def f(a, b, c):\n    return divmod(a, b), g(b, a, key=c), isinstance(a, int)\n",
    ]


def test_it_swaps_arguments_of_a_call_spread_over_lines_inside_a_block() -> None:
    source = """\
        class Box:
            def put(self, a, b):
                if a:
                    store(
                        a,
                        # the second one
                        b,
                    )
        """
    mutants = mutate(source, "swap_arguments")
    assert texts(mutants) == [
        dedent(source).replace("    a,\n", "    §,\n").replace("    b,\n", "    a,\n").replace("§", "b")
    ]
    assert (mutants[0].line, mutants[0].function) == (5, "Box.put")


def test_it_turns_a_raise_into_return_none() -> None:
    source = "if X:\n    raise RuntimeError\ndef f(x):\n    if x:\n        raise ValueError(x)\n"
    mutants = mutate(source, "exception_swallow")
    assert texts(mutants) == ["if X:\n    raise RuntimeError\ndef f(x):\n    if x:\n        return None\n"]
    assert (mutants[0].line, mutants[0].function) == (5, "f")


def test_it_replaces_a_default_argument_with_none() -> None:
    mutants = mutate("def f(a, b=10, c=None):\n    return a, b, c\n", "default_argument")
    assert texts(mutants) == ["def f(a, b=None, c=None):\n    return a, b, c\n"]
    assert mutants[0].description == "default `b=10` became `b=None` in f (line 1)"


def test_it_empties_or_fills_a_string_constant() -> None:
    source = "def f(parts):\n    return ''.join(parts).split(\",\")\n"
    assert texts(mutate(source, "string_constant")) == [
        "def f(parts):\n    return 'x'.join(parts).split(\",\")\n",
        "def f(parts):\n    return ''.join(parts).split(\"\")\n",
    ]


def test_it_leaves_error_messages_alone() -> None:
    source = "def f(x):\n    assert x, 'need x'\n    raise ValueError('bad x')\n"
    assert mutate(source, "string_constant") == []


def test_it_swaps_break_and_continue() -> None:
    source = "def f(xs):\n    for x in xs:\n        if x:\n            break\n        continue\n"
    assert texts(mutate(source, "break_continue_swap")) == [
        "def f(xs):\n    for x in xs:\n        if x:\n            continue\n        continue\n",
        "def f(xs):\n    for x in xs:\n        if x:\n            break\n        break\n",
    ]


# --------------------------------------------------------------------------- where a mutant is


def test_it_names_the_enclosing_method_nested_function_and_class() -> None:
    source = """\
        LIMIT = 3

        class Config:
            size = 4

            def load(self):
                def inner():
                    return 5
                return 6
        """
    mutants = mutate(source, "off_by_one")
    assert sorted({(mutant.line, mutant.function) for mutant in mutants}) == [
        (1, None),
        (4, None),
        (8, "Config.load.inner"),
        (9, "Config.load"),
    ]
    assert [mutant.description for mutant in mutants] == [
        "`3` became `4` at module level (line 1)",
        "`3` became `2` at module level (line 1)",
        "`4` became `5` in class Config (line 4)",
        "`4` became `3` in class Config (line 4)",
        "`5` became `6` in Config.load.inner (line 8)",
        "`5` became `4` in Config.load.inner (line 8)",
        "`6` became `7` in Config.load (line 9)",
        "`6` became `5` in Config.load (line 9)",
    ]


# --------------------------------------------------------------------------- skip rules


def test_it_leaves_docstrings_alone() -> None:
    source = '"""Module 1."""\n\ndef f():\n    """Return 2."""\n    ...\n'
    assert mutate(source) == []


def test_it_leaves_type_annotations_alone() -> None:
    source = (
        "from typing import Literal\n\n"
        "def f(x: Literal[1] = 0) -> tuple[int, Literal['a']]:\n    y: Literal[2]\n    return (x,)\n"
    )
    mutants = mutate(source)
    assert {mutant.operator for mutant in mutants} == {"off_by_one", "default_argument", "return_value"}
    assert all("Literal[1]" in mutant.mutated and "Literal['a']" in mutant.mutated for mutant in mutants)


def test_it_skips_main_guards_type_checking_blocks_and_logging() -> None:
    source = """\
        import logging
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            X = 1
        logger = logging.getLogger(__name__)

        def f(x):
            logger.info("got %s of %d", x, 1)
            return x

        if __name__ == "__main__":
            f(2)
        """
    assert [(mutant.operator, mutant.line) for mutant in mutate(source)] == [
        ("remove_statement", 6),
        ("return_value", 10),
    ]


def test_it_skips_module_dunders_and_init_files_that_only_reexport() -> None:
    init = '"""Package."""\nfrom pkg.mod import f\n\n__all__ = ["f"]\n__version__ = "1.0"\n'
    assert mutants_for_source(init, "pkg/__init__.py") == []
    assert mutants_for_source(init + "LIMIT = 1\n", "pkg/__init__.py") != []
    assert mutate("__all__ = ['f']\n__version__ = '1.0'\n") == []


def test_it_rejects_unknown_operators() -> None:
    with pytest.raises(ValueError, match="no_such_operator"):
        mutate("x = 1\n", "no_such_operator")


def test_repo_scan_skips_tests_conftest_and_virtualenvs(tmp_path: Path) -> None:
    for relative in (
        "pkg/mod.py",
        "pkg/test_mod.py",
        "tests/test_a.py",
        "tests/helpers.py",
        "conftest.py",
        "venv/lib.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("X = 1\n")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("")
    assert {mutant.path for mutant in mutants_for_repo(tmp_path)} == {"pkg/mod.py"}
    everything = {mutant.path for mutant in mutants_for_repo(tmp_path, include=lambda path: True)}
    assert everything == {"pkg/mod.py", "pkg/test_mod.py", "tests/test_a.py", "tests/helpers.py", "conftest.py"}


def test_repo_scan_keeps_crlf_line_endings_and_skips_broken_files(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_bytes(b"def f(x):\r\n    return x + 1\r\n")
    (tmp_path / "broken.py").write_bytes(b"def f(:\n")
    mutants = mutants_for_repo(tmp_path, operators=["arithmetic_swap"])
    assert texts(mutants) == ["def f(x):\r\n    return x - 1\r\n"]


# --------------------------------------------------------------------------- whole-list properties


def test_it_removes_duplicate_mutants_across_operators() -> None:
    # `if True:` -> `if False:` is both a constant flip and a forced conditional.
    mutants = mutate("def f():\n    if True:\n        return 1\n", "bool_constant_flip", "remove_conditional")
    assert [(mutant.operator, mutant.mutated) for mutant in mutants] == [
        ("bool_constant_flip", "def f():\n    if False:\n        return 1\n"),
    ]


def test_every_configkit_mutant_parses_and_changes_the_source() -> None:
    mutants = mutants_for_repo(CONFIGKIT)
    assert len({mutant.mutated for mutant in mutants}) == len(mutants)
    for mutant in mutants:
        assert mutant.mutated != mutant.original
        ast.parse(mutant.mutated)
        assert mutant.original.splitlines()[mutant.line - 1].strip(), mutant.description


def test_it_is_deterministic() -> None:
    first = mutants_for_repo(CONFIGKIT)
    assert first == mutants_for_repo(CONFIGKIT)
    assert first == sorted(first, key=lambda mutant: (mutant.path, mutant.line))


def test_it_yields_many_mutants_of_every_kind_for_the_configkit_demo() -> None:
    mutants = mutants_for_repo(CONFIGKIT)
    per_operator = Counter(mutant.operator for mutant in mutants)
    assert {mutant.path for mutant in mutants} == {"configkit/config.py", "configkit/values.py"}
    assert len(mutants) >= 200
    assert set(per_operator) == set(OPERATORS)
    assert per_operator["comparison_flip"] >= 10
    assert per_operator["remove_statement"] >= 30


# --------------------------------------------------------------------------- combine


SOURCE = "def f(a, b):\n    if a < b:\n        return a + 1\n    return b\n"


def by_operator(operator: str) -> Mutant:
    return mutate(SOURCE, operator)[0]


def test_it_combines_two_mutants_of_the_same_file() -> None:
    flip, swap = by_operator("comparison_flip"), by_operator("arithmetic_swap")
    both = combine(flip, swap)
    assert both is not None
    assert both.mutated == "def f(a, b):\n    if a <= b:\n        return a - 1\n    return b\n"
    assert (both.operator, both.line, both.function) == ("comparison_flip+arithmetic_swap", 2, "f")
    assert both.description == f"{flip.description}; {swap.description}"
    assert combine(swap, flip) == both


def test_it_refuses_to_combine_overlapping_or_cross_file_mutants() -> None:
    returned, swap = by_operator("return_value"), by_operator("arithmetic_swap")
    assert combine(returned, swap) is None
    assert combine(swap, swap) is None
    elsewhere = Mutant(**{**swap.__dict__, "path": "pkg/other.py"})
    assert combine(by_operator("comparison_flip"), elsewhere) is None


# --------------------------------------------------------------------------- sample_mutants


def test_sampling_is_deterministic_and_ignores_input_order() -> None:
    mutants = mutants_for_repo(CONFIGKIT)
    picked = sample_mutants(mutants, 20, seed=7)
    assert len(picked) == 20
    assert picked == sample_mutants(list(reversed(mutants)), 20, seed=7)
    assert picked != sample_mutants(mutants, 20, seed=8)
    assert len(set(picked)) == 20


def test_sampling_spreads_over_files_and_operators() -> None:
    mutants = mutants_for_repo(CONFIGKIT)
    picked = sample_mutants(mutants, 20, seed=1)
    assert Counter(mutant.path for mutant in picked) == {"configkit/config.py": 10, "configkit/values.py": 10}
    assert len({mutant.operator for mutant in picked}) >= 10


def test_sampling_more_than_there_are_returns_each_once() -> None:
    mutants = mutate(SOURCE)
    assert sorted(texts(sample_mutants(mutants, 1000, seed=0))) == sorted(texts(mutants))
    assert sample_mutants(mutants, 0, seed=0) == []
