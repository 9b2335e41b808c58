"""Readability estimates for English text."""

from __future__ import annotations

import math
import re

from textstats.tokenize import sentences, words

VOWEL_GROUP_RE = re.compile(r"[aeiouy]+")


def count_syllables(word: str) -> int:
    """Estimate the syllables in an English word (at least 1 for any word)."""
    word = word.lower().strip("'’")
    if not word:
        return 0
    count = len(VOWEL_GROUP_RE.findall(word))
    if word.endswith("e") and not word.endswith(("le", "ee")):
        count -= 1  # silent final e: "make", "note"
    return count


def flesch_reading_ease(text: str) -> float:
    """Flesch reading ease, rounded to 2 places; higher is easier. 0.0 for empty text.

    206.835 - 1.015 * (words / sentences) - 84.6 * (syllables / words)
    """
    found = words(text)
    if not found:
        return 0.0
    sentence_count = max(len(sentences(text)), 1)
    syllables = sum(count_syllables(word) for word in found)
    score = 206.835 - 1.015 * (len(found) / sentence_count) - 84.6 * (syllables / len(found))
    return round(score, 2)


def reading_time_minutes(text: str, words_per_minute: int = 200) -> int:
    """Whole minutes needed to read ``text``, rounded up; 0 for empty text."""
    if words_per_minute <= 0:
        raise ValueError("words_per_minute must be positive")
    return math.ceil(len(words(text)) / words_per_minute)
