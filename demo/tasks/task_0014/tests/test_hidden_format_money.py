from decimal import Decimal

from invledger import format_money


def test_negative_amount_puts_sign_first():
    assert format_money("-3") == "-$3.00"


def test_negative_amount_with_thousands_and_symbol():
    assert format_money(Decimal("-1234.5"), symbol="€") == "-€1,234.50"


def test_amount_that_rounds_to_zero_has_no_sign():
    assert format_money("-0.001") == "$0.00"


def test_positive_amounts():
    assert format_money("1000000") == "$1,000,000.00"
