"""Split text into words and sentences."""

from __future__ import annotations

import re

# Runs of letters or digits; a hyphen may join two runs ("well-known").
WORD_RE = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
SENTENCE_END_RE = re.compile(r"[.!?]+(?=\s|$)")
ABBREVIATIONS = frozenset({"dr", "e.g", "etc", "i.e", "jr", "mr", "mrs", "ms", "prof", "sr", "st", "vs"})


def words(text: str) -> list[str]:
    """Return the words of ``text`` in order, punctuation removed."""
    return WORD_RE.findall(text)


def _ends_with_abbreviation(chunk: str) -> bool:
    last_word = chunk.rsplit(None, 1)[-1].rstrip(".")
    return last_word in ABBREVIATIONS


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping their closing punctuation.

    A sentence ends at ``.``, ``!`` or ``?`` followed by whitespace or the end
    of the text, except after a known abbreviation such as "Dr.". Text after
    the last terminator is a sentence of its own.
    """
    result: list[str] = []
    start = 0
    for match in SENTENCE_END_RE.finditer(text):
        chunk = text[start : match.end()].strip()
        if match.group() == "." and _ends_with_abbreviation(chunk):
            continue
        if chunk:
            result.append(chunk)
        start = match.end()
    return result
