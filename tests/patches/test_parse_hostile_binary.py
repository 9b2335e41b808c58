"""A GIT binary patch is inflated with a bound: a tiny patch cannot claim gigabytes."""

from __future__ import annotations

import base64
import zlib

import pytest

from patches import PatchError, parse
from patches.model import MAX_BINARY_BYTES

LENGTHS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def binary_patch(claimed: int, payload: bytes) -> str:
    packed = zlib.compress(payload, 9)
    lines = []
    for start in range(0, len(packed), 52):
        chunk = packed[start : start + 52]
        pad = chunk + b"\0" * (-len(chunk) % 4)
        lines.append(LENGTHS[len(chunk) - 1] + base64.b85encode(pad).decode())
    body = "\n".join(lines)
    return (
        "diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\n"
        f"literal {claimed}\n{body}\n\nliteral 0\nHcmV?d00001\n\n"
    )


def test_a_binary_patch_claiming_more_than_the_limit_is_refused_before_inflating() -> None:
    with pytest.raises(PatchError, match="over the"):
        parse(binary_patch(MAX_BINARY_BYTES + 1, b"\0" * 1024))


def test_a_zip_bomb_that_lies_about_its_size_is_refused_without_inflating_it_all() -> None:
    # 200 MB of zeros deflates to ~200 kB; the patch claims 10 bytes.
    bomb = b"\0" * (200 * 1024 * 1024)
    with pytest.raises(PatchError, match="inflates to 11 bytes, not 10"):
        parse(binary_patch(10, bomb))
