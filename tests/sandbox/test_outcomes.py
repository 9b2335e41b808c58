"""One reader of test outcomes: real pytest runs in the sandbox, read the way scoring reads them."""

from __future__ import annotations

from pathlib import Path

from sandbox import Sandbox, results
from sandbox.backends.bwrap import BwrapBackend
from sandbox.junit import claim_problem, reconcile
from sandbox.results import Outcome

from .conftest import SMALL

MIXED = """
import unittest

import pytest


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert 0


@pytest.mark.xfail(reason="fixed since")
def test_xpass():
    pass


@pytest.mark.xfail(reason="strict one", strict=True)
def test_xpass_strict():
    pass


@pytest.mark.parametrize("v", [1, "a b", 3])
def test_param(v):
    assert v != 3


@pytest.mark.skip(reason="nope")
def test_skip():
    pass


class TestGroup:
    class TestInner:
        def test_nested(self):
            pass


class Case(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(1, 1)

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)
"""


def _run(tmp_path: Path, files: dict[str, str]) -> results.TestReport:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    with Sandbox(repo, BwrapBackend(), limits=SMALL) as box:
        return box.run_tests(("-q",))


def test_every_outcome_of_a_real_run_is_read_as_pytest_counts_it(tmp_path: Path) -> None:
    report = _run(tmp_path, {"tests/test_mixed.py": MIXED})
    got = {node.removeprefix("tests/test_mixed.py::"): (t.outcome, t.xfail) for node, t in report.tests.items()}
    assert got == {
        "test_xfail": (Outcome.XFAILED, True),
        "test_xpass": (Outcome.XPASSED, True),
        "test_xpass_strict": (Outcome.FAILED, True),
        "test_param[1]": (Outcome.PASSED, False),
        "test_param[a b]": (Outcome.PASSED, False),
        "test_param[3]": (Outcome.FAILED, False),
        "test_skip": (Outcome.SKIPPED, False),
        "TestGroup::TestInner::test_nested": (Outcome.PASSED, False),
        "Case::test_equal": (Outcome.PASSED, False),
        "Case::test_expected_failure": (Outcome.XFAILED, True),
    }
    # The summary line and the report agree once the XPASS is read as one: the run is trusted.
    assert report.inconsistencies == []
    assert report.valid and report.passed("tests/test_mixed.py::test_xpass")


def test_a_collection_error_is_its_own_outcome_keyed_by_the_file(tmp_path: Path) -> None:
    report = _run(
        tmp_path,
        {"tests/test_ok.py": "def test_ok():\n    pass\n", "tests/sub/test_broken.py": "import not_a_module_here\n"},
    )
    assert report.collection_errors == ["tests/sub/test_broken.py"]
    broken = report.tests["tests/sub/test_broken.py"]
    assert broken.outcome == Outcome.COLLECTION_ERROR and "not_a_module_here" in broken.message


def test_a_disagreement_names_both_counts_and_the_ids_that_differ() -> None:
    tests = {
        "t.py::a": results.TestOutcome("t.py::a", Outcome.PASSED),
        "t.py::b": results.TestOutcome("t.py::b", Outcome.PASSED),
    }
    # The summary counts an XPASS its -r lines do not name (a task command's own -rf won over -rxX).
    problems = reconcile(tests, "2 failed\n1 passed, 1 xpassed in 0.1s\n")
    assert problems == [
        "pytest's summary says 1 passed, the report 2",
        "pytest's summary says 1 xpassed, the report 0 (ids that differ: none named by -rxX)",
    ]
    # Printed by the code under test, outside pytest's own section: not believed.
    assert reconcile(tests, "XPASS t.py::a - fake\n2 passed in 0.1s\n") == []
    assert tests["t.py::a"].outcome == Outcome.PASSED
    stdout = (
        "== short test summary info ==\nXPASS t.py::b - fixed\nXPASS t.py::gone - fixed\n1 passed, 2 xpassed in 0.1s\n"
    )
    problems = reconcile(tests, stdout)
    assert tests["t.py::b"].outcome == Outcome.XPASSED
    assert problems == ["pytest's summary says 2 xpassed, the report 1 (ids that differ: t.py::gone)"]


MIXIN = """
class Behaviour:
    def test_one(self):
        self.assertEqual(self.value, 1)

    def test_two(self):
        self.assertTrue(self.value)
"""


def test_tests_inherited_from_a_mixin_in_another_module_keep_one_id_per_class(tmp_path: Path) -> None:
    # unittest suites share test methods through a mixin in tests/__init__.py: JUnit's `file` is
    # where each method is written (the mixin's), the class it ran in is only in `classname`.
    case = (
        "import unittest\nfrom tests import Behaviour\n\n\nclass {name}(Behaviour, unittest.TestCase):\n    value = 1\n"  # noqa: E501
    )
    report = _run(tmp_path, {
        "tests/__init__.py": MIXIN,
        "tests/test_a.py": case.format(name="TestA"),
        "tests/test_b.py": case.format(name="TestB"),
        "tests/sub/__init__.py": "",
        "tests/sub/test_c.py": case.format(name="TestA"),
    })  # fmt: skip
    assert sorted(report.tests) == [
        "tests/sub/test_c.py::TestA::test_one", "tests/sub/test_c.py::TestA::test_two",
        "tests/test_a.py::TestA::test_one", "tests/test_a.py::TestA::test_two",
        "tests/test_b.py::TestB::test_one", "tests/test_b.py::TestB::test_two",
    ]  # fmt: skip
    assert report.inconsistencies == [] and report.valid


def test_a_text_files_doctest_keeps_the_id_pytest_gives_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "README.rst").write_text("Adding::\n\n    >>> 1 + 1\n    2\n")
    (repo / "docs" / "usage.txt").write_text(">>> 2 * 3\n6\n")
    with Sandbox(repo, BwrapBackend(), limits=SMALL) as box:
        report = box.run_tests(("--doctest-glob=*.rst", "--doctest-glob=*.txt", "README.rst", "docs/usage.txt"))
    assert sorted(report.tests) == ["README.rst::README.rst", "docs/usage.txt::usage.txt"]
    assert report.valid and all(t.outcome == Outcome.PASSED for t in report.tests.values())


SUBTESTS = """
import unittest


class Case(unittest.TestCase):
    def test_every_subtest_passes(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertEqual(i, i)

    def test_one_subtest_fails(self):
        for i in range(3):
            with self.subTest(msg="value", i=i):
                self.assertNotEqual(i, 1)

    def test_plain(self):
        pass


def test_fixture_subtest_fails(subtests):
    for i in range(2):
        with subtests.test(i=i):
            assert i == 0


def test_fixture_subtests_pass(subtests):
    for i in range(2):
        with subtests.test(i=i):
            assert i >= 0
"""


def test_a_failing_subtest_fails_its_test_and_the_counts_still_agree(tmp_path: Path) -> None:
    # pytest 9 counts each sub-test in its summary and in the report's `tests`, and passes a
    # unittest test whose sub-test failed: read as one outcome per test, the run is still believed.
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_sub.py").write_text(SUBTESTS)
    expected = {
        "Case::test_every_subtest_passes": Outcome.PASSED,
        "Case::test_one_subtest_fails": Outcome.FAILED,
        "Case::test_plain": Outcome.PASSED,
        "test_fixture_subtest_fails": Outcome.FAILED,
        "test_fixture_subtests_pass": Outcome.PASSED,
    }
    with Sandbox(repo, BwrapBackend(), limits=SMALL) as box:
        for seal in ("", "0123456789abcdef01234567"):
            report = box.run_tests(("-q",), seal=seal)
            got = {node.removeprefix("tests/test_sub.py::"): t.outcome for node, t in report.tests.items()}
            assert got == expected, seal
            assert report.inconsistencies == [] and report.tampered == [] and report.valid, seal


def test_a_skipped_subtest_may_skip_its_test_but_a_forged_pass_is_still_caught() -> None:
    # A sub-test skipped, then its test passed: JUnit keeps only the skip; the summary counts both.
    stdout = "== short test summary info ==\n1 passed, 1 skipped, 2 subtests passed in 0.1s\n"
    tests = {"t.py::T::test_a": results.TestOutcome("t.py::T::test_a", Outcome.SKIPPED)}
    assert reconcile(tests, stdout) == []
    assert claim_problem(4, tests, stdout) == ""
    # Without sub-tests in the summary, every count must still agree exactly.
    assert reconcile(tests, "1 passed, 1 skipped in 0.1s\n") == ["pytest's summary says 1 passed, the report 0"]
    assert claim_problem(4, tests, "1 skipped in 0.1s\n") == "the report claims 4 tests but lists 1"
    # More passes than the summary counts is a report to disbelieve, sub-tests or not.
    forged = {f"t.py::test_{n}": results.TestOutcome(f"t.py::test_{n}", Outcome.PASSED) for n in range(3)}
    assert reconcile(forged, "2 passed, 1 failed, 3 subtests passed in 0.1s\n") == [
        "pytest's summary says 2 passed, the report 3 (with its sub-tests, the report should have 2 to 2)"
    ]
