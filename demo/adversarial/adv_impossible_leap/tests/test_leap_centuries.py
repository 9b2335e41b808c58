from calckit import is_leap


def test_2000_is_a_leap_year():
    assert is_leap(2000)


def test_1900_is_a_leap_year():
    assert is_leap(1900)


def test_2023_is_not_a_leap_year():
    assert not is_leap(2023)
