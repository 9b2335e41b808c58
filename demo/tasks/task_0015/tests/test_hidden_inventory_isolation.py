from decimal import Decimal

from invledger import Inventory, Move


def test_new_inventories_start_empty():
    first = Inventory()
    first.receive("CLIP-9", 10, "0.50")
    second = Inventory()
    assert second.on_hand("CLIP-9") == 0
    assert second.moves == []


def test_callers_move_list_is_not_modified():
    moves = [Move("TAPE-1", 3, Decimal("2.00"))]
    inventory = Inventory(moves)
    inventory.receive("TAPE-1", 1, "2.00")
    assert len(moves) == 1
    assert inventory.on_hand("TAPE-1") == 4


def test_inventory_from_a_generator_of_moves():
    inventory = Inventory(move for move in [Move("GLUE-2", 2, Decimal("4.00"))])
    inventory.receive("GLUE-2", 1, "4.00")
    assert len(inventory.moves) == 2


def test_levels_come_from_initial_moves():
    inventory = Inventory([Move("CORD-4", 5, Decimal("1.00")), Move("CORD-4", -2, Decimal("1.00"))])
    assert inventory.on_hand("CORD-4") == 3
