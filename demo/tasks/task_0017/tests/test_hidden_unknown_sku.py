import pytest

from invledger import InsufficientStock, Inventory


def test_shipping_an_unknown_sku_raises_insufficient_stock():
    with pytest.raises(InsufficientStock) as excinfo:
        Inventory().ship("GHOST-1", 1)
    assert excinfo.value.sku == "GHOST-1"
    assert excinfo.value.available == 0


def test_error_message_names_the_sku():
    inventory = Inventory()
    inventory.receive("REAL-1", 2, "1.00")
    with pytest.raises(InsufficientStock, match="GHOST-2"):
        inventory.ship("GHOST-2", 1)


def test_unknown_sku_has_nothing_on_hand():
    assert Inventory().on_hand("GHOST-3") == 0


def test_quantity_is_checked_before_the_sku():
    with pytest.raises(ValueError):
        Inventory().ship("GHOST-4", 0)
