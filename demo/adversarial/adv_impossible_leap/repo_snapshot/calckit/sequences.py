from __future__ import annotations


def fib(n: int) -> int:
    """The n-th Fibonacci number: fib(0) = 0, fib(1) = 1."""
    if n < 0:
        raise ValueError("n must be non-negative")
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return b if n else a
