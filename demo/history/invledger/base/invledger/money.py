"""Money as Decimal rounded to cents."""

from __future__ import annotations

from decimal import Decimal

CENT = Decimal("0.01")
Amount = Decimal | int | str


def to_money(value: Amount) -> Decimal:
    """Round to whole cents, halves away from zero (0.125 -> 0.13), as on invoices."""
    if isinstance(value, float):
        raise TypeError("use Decimal, int or str for money, not float")
    return Decimal(value).quantize(CENT)


def format_money(amount: Amount, symbol: str = "$") -> str:
    """Format like ``$1,234.50``; negative amounts put the sign first: ``-$3.00``."""
    value = to_money(amount)
    return f"{symbol}{value:,.2f}"


def allocate(total: Amount, parts: int) -> list[Decimal]:
    """Split ``total`` into ``parts`` amounts that add up to it exactly.

    Leftover cents go to the first parts: 10.00 / 3 -> 3.34, 3.33, 3.33.
    """
    if parts <= 0:
        raise ValueError("parts must be positive")
    cents = int(to_money(total) * 100)
    base, remainder = divmod(cents, parts)
    return [(Decimal(base + (1 if i < remainder else 0)) / 100).quantize(CENT) for i in range(parts)]
