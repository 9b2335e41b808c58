import pytest

from invledger import InsufficientStock, Inventory, valuation_report


def test_can_ship_the_entire_stock():
    inventory = Inventory()
    inventory.receive("LAMP-2", 4, "15.00")
    inventory.ship("LAMP-2", 4)
    assert inventory.on_hand("LAMP-2") == 0


def test_sold_out_sku_leaves_the_report():
    inventory = Inventory()
    inventory.receive("LAMP-3", 1, "15.00")
    inventory.ship("LAMP-3", 1)
    assert valuation_report(inventory) == []


def test_one_more_than_on_hand_still_raises():
    inventory = Inventory()
    inventory.receive("LAMP-4", 4, "15.00")
    with pytest.raises(InsufficientStock) as excinfo:
        inventory.ship("LAMP-4", 5)
    assert (excinfo.value.requested, excinfo.value.available) == (5, 4)


def test_partial_shipment():
    inventory = Inventory()
    inventory.receive("LAMP-5", 4, "15.00")
    inventory.ship("LAMP-5", 3)
    assert inventory.on_hand("LAMP-5") == 1
