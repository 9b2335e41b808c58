from __future__ import annotations


def is_leap(year: int) -> bool:
    """Whether `year` is a leap year in the Gregorian calendar."""
    return year % 4 == 0 and year % 100 != 0
