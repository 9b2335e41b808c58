from decimal import Decimal

import pytest

from invledger import allocate, format_money, to_money


def test_to_money_rounds_to_cents():
    assert to_money("19.999") == Decimal("20.00")
    assert to_money("0.135") == Decimal("0.14")
    assert to_money(5) == Decimal("5.00")


def test_to_money_rejects_floats():
    with pytest.raises(TypeError):
        to_money(0.1)


def test_format_money():
    assert format_money("1234.5") == "$1,234.50"
    assert format_money(0, symbol="€") == "€0.00"


def test_allocate_spreads_leftover_cents():
    assert allocate("10.00", 3) == [Decimal("3.34"), Decimal("3.33"), Decimal("3.33")]
    assert sum(allocate("0.05", 2)) == Decimal("0.05")
