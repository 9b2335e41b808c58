from calckit import fib


def test_small_values():
    assert [fib(n) for n in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]


def test_large_n_is_fast():
    assert fib(300) == 222232244629420445529739893461909967206666939096499764990979600


def test_fib_of_one():
    assert fib(1) == 1
