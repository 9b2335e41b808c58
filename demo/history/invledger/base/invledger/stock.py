"""Stock levels kept as a ledger of moves."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from invledger.money import Amount, to_money


class InsufficientStock(Exception):
    """A shipment asked for more units than are on hand."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"cannot ship {requested} x {sku}: only {available} on hand")
        self.sku = sku
        self.requested = requested
        self.available = available


@dataclass(frozen=True)
class Move:
    sku: str
    quantity: int  # > 0 received, < 0 shipped
    unit_cost: Decimal
    memo: str = ""


class Inventory:
    """Stock per SKU, derived from an append-only list of moves."""

    def __init__(self, moves: list[Move] = []) -> None:
        self.moves = moves
        self._levels: dict[str, int] = {}
        for move in moves:
            self._levels[move.sku] = self._levels.get(move.sku, 0) + move.quantity

    def _record(self, move: Move) -> Move:
        self.moves.append(move)
        self._levels[move.sku] = self._levels.get(move.sku, 0) + move.quantity
        return move

    def receive(self, sku: str, quantity: int, unit_cost: Amount, memo: str = "") -> Move:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        return self._record(Move(sku, quantity, to_money(unit_cost), memo))

    def ship(self, sku: str, quantity: int, memo: str = "") -> Move:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        available = self._levels[sku]
        if quantity >= available:
            raise InsufficientStock(sku, quantity, available)
        return self._record(Move(sku, -quantity, self.average_cost(sku), memo))

    def on_hand(self, sku: str) -> int:
        return self._levels.get(sku, 0)

    def skus(self) -> list[str]:
        return sorted(self._levels)

    def average_cost(self, sku: str) -> Decimal:
        """Weighted average cost of every unit ever received for ``sku``."""
        received = [move for move in self.moves if move.sku == sku and move.quantity > 0]
        units = sum(move.quantity for move in received)
        if units == 0:
            return to_money(0)
        total = sum((move.unit_cost * move.quantity for move in received), Decimal(0))
        return to_money(total / units)

    def value(self, sku: str) -> Decimal:
        return to_money(self.average_cost(sku) * self.on_hand(sku))
