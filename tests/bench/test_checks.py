"""`make bench CHECK=1` fails when a bench misses a target, and says which."""

from __future__ import annotations

from typing import Any

import pytest

import bench.__main__ as main
from bench.checks import check, table


def test_a_check_is_met_on_the_right_side_of_its_target() -> None:
    assert check("ratio", 1.4, 1.5, better="lower")["met"] and not check("ratio", 1.6, 1.5, better="lower")["met"]
    assert check("speed", 2.1, 2.0, better="higher")["met"] and not check("speed", 1.9, 2.0, better="higher")["met"]


def test_the_table_marks_each_miss_and_counts_them() -> None:
    rows = [("a", check("fast", 1.2, 1.5, better="lower", unit="x", floor="bare")),
            ("b", check("quick", 31.0, 20, better="lower", unit=" ms"))]  # fmt: skip
    text = table(rows)
    assert "MISS" in text.splitlines()[2] and "ok" in text.splitlines()[1] and "1 of 2 checks met" in text


@pytest.mark.parametrize(("value", "flag", "code"), [(1.0, True, 0), (3.0, True, 1), (3.0, False, 0)])
def test_check_exits_non_zero_only_when_asked_and_a_target_is_missed(
    value: float, flag: bool, code: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: Any
) -> None:
    monkeypatch.setattr(main, "OUT", tmp_path)
    monkeypatch.setattr(main, "BENCHES", {"fake": lambda: {"checks": [check("x", value, 2.0, better="lower")]}})
    monkeypatch.setattr("sys.argv", ["bench", "fake", *(["--check"] if flag else [])])
    assert main.main() == code
    assert '"load_average"' in (tmp_path / "fake.json").read_text()
    assert ("MISS" in capsys.readouterr().out) == (value > 2.0)
