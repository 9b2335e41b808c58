"""Turn the raw text on the right of ``=`` into Python values."""

from __future__ import annotations

from typing import Any

TRUE_WORDS = frozenset({"true", "yes", "on"})
FALSE_WORDS = frozenset({"false", "no", "off"})
QUOTES = "\"'"


def parse_value(raw: str) -> Any:
    """Convert one raw value.

    ``"quoted"`` or ``'quoted'`` text becomes a str without the quotes,
    true/yes/on and false/no/off (any case) become bools, integers and floats
    become numbers, ``[a, b]`` becomes a list, anything else stays a str.
    """
    text = raw.strip()
    if len(text) > 2 and text[0] in QUOTES and text[-1] == text[0]:
        return text[1:-1]
    lowered = text.lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    if text.startswith("[") and text.endswith("]"):
        return parse_list(text[1:-1])
    # float() also accepts "nan" and "inf", which here are far more likely words.
    if any(char.isdigit() for char in text):
        for number_type in (int, float):
            try:
                return number_type(text)
            except ValueError:
                pass
    return text


def parse_list(inner: str) -> list[Any]:
    """Parse the inside of ``[a, b, c]``; a trailing comma is allowed."""
    items = inner.split(",")
    if items[-1].strip() == "":
        items.pop()
    return [parse_value(item) for item in items]
