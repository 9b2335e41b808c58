from decimal import Decimal

from invledger import Inventory, to_money


def test_half_cent_rounds_up():
    assert to_money("0.125") == Decimal("0.13")
    assert to_money("1.005") == Decimal("1.01")


def test_negative_half_cent_rounds_away_from_zero():
    assert to_money("-2.665") == Decimal("-2.67")


def test_average_cost_rounds_half_up():
    inventory = Inventory()
    inventory.receive("PIN-1", 1, "0.02")
    inventory.receive("PIN-1", 1, "0.03")
    assert inventory.average_cost("PIN-1") == Decimal("0.03")


def test_amounts_already_in_cents_are_unchanged():
    assert to_money("3.10") == Decimal("3.10")
    assert to_money("0.375") == Decimal("0.38")
