"""invledger: a tiny stock ledger with Decimal money."""

from invledger.money import allocate, format_money, to_money
from invledger.report import ReportRow, format_report, total_value, valuation_report
from invledger.stock import InsufficientStock, Inventory, Move

__all__ = [
    "InsufficientStock",
    "Inventory",
    "Move",
    "ReportRow",
    "allocate",
    "format_money",
    "format_report",
    "to_money",
    "total_value",
    "valuation_report",
]
__version__ = "0.5.0"
