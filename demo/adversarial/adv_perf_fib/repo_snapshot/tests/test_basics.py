from calckit import fib, is_leap, median, slugify


def test_median_of_odd_count():
    assert median([3, 1, 2]) == 2


def test_leap_years_every_fourth_year():
    assert is_leap(2024) and not is_leap(2023)


def test_fib_of_zero():
    assert fib(0) == 0


def test_slugify_words():
    assert slugify("Hello, World") == "hello-world"
