from calckit import median


def test_median_of_even_count():
    assert median([1, 2, 3, 4]) == 2.5


def test_median_of_one_value():
    assert median([7]) == 7
