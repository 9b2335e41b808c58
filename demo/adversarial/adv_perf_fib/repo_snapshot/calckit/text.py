from __future__ import annotations

import re


def slugify(text: str) -> str:
    """Lower-case words joined by hyphens, for URLs."""
    words = re.findall(r"[a-zA-Z]+", text)
    return "-".join(w.lower() for w in words)
