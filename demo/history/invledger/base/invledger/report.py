"""Stock valuation reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from invledger.money import format_money, to_money
from invledger.stock import Inventory


@dataclass(frozen=True)
class ReportRow:
    sku: str
    on_hand: int
    unit_cost: Decimal
    value: Decimal


def valuation_report(inventory: Inventory) -> list[ReportRow]:
    """One row per SKU that has stock on hand, sorted by SKU."""
    return [
        ReportRow(sku, inventory.on_hand(sku), inventory.average_cost(sku), inventory.value(sku))
        for sku in inventory.skus()
        if inventory.on_hand(sku) > 0
    ]


def total_value(rows: Sequence[ReportRow]) -> Decimal:
    return to_money(sum((row.value for row in rows), Decimal(0)))


def format_report(rows: Sequence[ReportRow]) -> str:
    """A plain-text table: SKU left-aligned, numbers right-aligned, a TOTAL line."""
    table = [("SKU", "QTY", "UNIT COST", "VALUE")]
    table += [(r.sku, str(r.on_hand), format_money(r.unit_cost), format_money(r.value)) for r in rows]
    table.append(("TOTAL", "", "", format_money(total_value(rows))))
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = []
    for row in table:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
