from calckit.calendar import is_leap
from calckit.sequences import fib
from calckit.stats import median
from calckit.text import slugify

__all__ = ["fib", "is_leap", "median", "slugify"]
