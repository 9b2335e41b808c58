from decimal import Decimal

from invledger import Inventory, Move, format_report, total_value, valuation_report


def make_inventory():
    return Inventory(
        [
            Move("GEAR-20", 4, Decimal("12.50")),
            Move("AXLE-5", 10, Decimal("3.00")),
            Move("AXLE-5", -10, Decimal("3.00")),
            Move("BELT-7", 2, Decimal("1200.00")),
        ]
    )


def test_report_skips_empty_skus_and_sorts():
    rows = valuation_report(make_inventory())
    assert [row.sku for row in rows] == ["BELT-7", "GEAR-20"]
    assert total_value(rows) == Decimal("2450.00")


def test_format_report():
    assert format_report(valuation_report(make_inventory())) == (
        "SKU      QTY  UNIT COST      VALUE\n"
        "BELT-7     2  $1,200.00  $2,400.00\n"
        "GEAR-20    4     $12.50     $50.00\n"
        "TOTAL                    $2,450.00\n"
    )
