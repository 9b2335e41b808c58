from decimal import Decimal

import pytest

from invledger import InsufficientStock, Inventory


def test_receive_and_ship():
    inventory = Inventory()
    inventory.receive("BOLT-M4", 100, "0.10")
    inventory.ship("BOLT-M4", 30)
    assert inventory.on_hand("BOLT-M4") == 70


def test_average_cost_is_weighted():
    inventory = Inventory()
    inventory.receive("NUT-M4", 10, "1.00")
    inventory.receive("NUT-M4", 30, "2.00")
    assert inventory.average_cost("NUT-M4") == Decimal("1.75")
    assert inventory.value("NUT-M4") == Decimal("70.00")


def test_shipping_too_much_raises():
    inventory = Inventory()
    inventory.receive("WASHER-8", 5, "0.05")
    with pytest.raises(InsufficientStock) as excinfo:
        inventory.ship("WASHER-8", 6)
    assert excinfo.value.available == 5


def test_quantities_must_be_positive():
    inventory = Inventory()
    with pytest.raises(ValueError):
        inventory.receive("SCREW-3", 0, "0.20")
