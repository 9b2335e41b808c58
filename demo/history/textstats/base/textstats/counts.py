"""Counting words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from textstats.tokenize import words


def word_count(text: str) -> int:
    """Number of words in ``text``."""
    return len(words(text))


def word_frequencies(text: str) -> Counter[str]:
    """How often each word occurs, case-insensitively."""
    return Counter(word.lower() for word in words(text))


def top_words(text: str, n: int = 10, stopwords: Iterable[str] = ()) -> list[tuple[str, int]]:
    """The ``n`` most frequent words as ``(word, count)`` pairs.

    Most frequent first; words with the same count are in alphabetical order,
    so the result does not depend on where words first appear.
    """
    ignored = {word.lower() for word in stopwords}
    counts = [(word, count) for word, count in word_frequencies(text).items() if word not in ignored]
    counts.sort(key=lambda item: (item[1], item[0]), reverse=True)
    return counts[:n]


def average_word_length(text: str) -> float:
    """Mean number of characters per word, rounded to 2 places; 0.0 without words."""
    found = words(text)
    if not found:
        return 0.0
    return round(sum(len(word) for word in found) / len(found), 2)
