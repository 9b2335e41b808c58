"""The content a "GIT binary patch" carries: inflate its data and apply git's deltas.

A binary patch hides its bytes from anything that reads `+` lines, so admission decodes
it and judges what it really writes (docs/reward-threat-model.md, "binary-encoded text").
"""

from __future__ import annotations

import base64
import zlib

from patches.model import MAX_BINARY_BYTES, BinaryHunk, FilePatch, FileStatus, PatchError

# The first character of a data line says how many bytes it holds: A-Z for 1-26, a-z for 27-52.
_LENGTHS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_LINE_BYTES = 52
# Far more than any source file: a delta or literal that claims more is refused, not inflated.
MAX_DECODED_BYTES = MAX_BINARY_BYTES


def inflate(hunk: BinaryHunk, limit: int = MAX_DECODED_BYTES) -> bytes:
    """The raw bytes of one half of a binary patch: a literal's content or a delta's instructions."""
    if hunk.size > limit:
        raise PatchError(f"a binary {hunk.method} of {hunk.size} bytes is over the {limit}-byte limit")
    packed = bytearray()
    for line in hunk.data:
        count = _LENGTHS.find(line[:1]) + 1 if line else 0
        if count == 0 or len(line) - 1 != (count + 3) // 4 * 5:
            raise PatchError(f"corrupt line in a GIT binary patch: {line[:60]!r}")
        try:
            packed += base64.b85decode(line[1:])[:count]
        except ValueError:
            raise PatchError(f"corrupt line in a GIT binary patch: {line[:60]!r}") from None
    inflater = zlib.decompressobj()
    try:
        # max_length bounds the work a small "zip bomb" can make us do.
        data = inflater.decompress(bytes(packed), limit + 1)
    except zlib.error as exc:
        raise PatchError(f"the {hunk.method} data of a GIT binary patch does not inflate ({exc})") from None
    if len(data) != hunk.size:
        raise PatchError(f"the {hunk.method} data of a GIT binary patch inflates to {len(data)} bytes, not {hunk.size}")
    return data


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise PatchError("a git delta ends inside its header")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def apply_delta(source: bytes, delta: bytes, limit: int = MAX_DECODED_BYTES) -> bytes:
    """git's delta format (patch-delta.c): copy ranges of `source` and insert literal bytes."""
    source_size, at = _varint(delta, 0)
    target_size, at = _varint(delta, at)
    if source_size != len(source):
        raise PatchError(f"a git delta expects a {source_size}-byte original, the base has {len(source)} bytes")
    if target_size > limit:
        raise PatchError(f"a git delta makes {target_size} bytes, over the {limit}-byte limit")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:
            offset = size = 0
            for bit, shift in ((0x01, 0), (0x02, 8), (0x04, 16), (0x08, 24)):
                if op & bit:
                    offset |= delta[at] << shift
                    at += 1
            for bit, shift in ((0x10, 0), (0x20, 8), (0x40, 16)):
                if op & bit:
                    size |= delta[at] << shift
                    at += 1
            size = size or 0x10000
            if offset + size > len(source):
                raise PatchError("a git delta copies past the end of the original")
            out += source[offset : offset + size]
        elif op:
            if at + op > len(delta):
                raise PatchError("a git delta ends inside inserted data")
            out += delta[at : at + op]
            at += op
        else:
            raise PatchError("a git delta holds the reserved opcode 0")
        if len(out) > target_size:
            raise PatchError("a git delta makes more bytes than its header says")
    if len(out) != target_size:
        raise PatchError(f"a git delta makes {len(out)} bytes, not the {target_size} its header says")
    return bytes(out)


def new_content(patch: FilePatch, old: bytes | None) -> bytes | None:
    """What a binary file patch leaves at its new path (None: the file is deleted).

    `old` is the original's content (None for a new file); a delta needs it. PatchError
    when the patch carries no data ("Binary files ... differ") or the data is corrupt.
    """
    if patch.status is FileStatus.DELETED:
        return None
    if not patch.binary_hunks:
        raise PatchError(f"{patch.path}: a binary change without its data cannot be applied")
    forward = patch.binary_hunks[0]
    data = inflate(forward)
    if forward.method == "literal":
        return data
    if forward.method != "delta":
        raise PatchError(f"{patch.path}: unknown binary patch method {forward.method!r}")
    if old is None:
        raise PatchError(f"{patch.path}: a binary delta with no original to apply it to")
    return apply_delta(old, data)


def literal_hunk(content: bytes) -> BinaryHunk:
    """`content` as git writes a literal: deflated, then base85 in lines of up to 52 bytes."""
    packed = zlib.compress(content, 9)
    lines = []
    for start in range(0, len(packed), _LINE_BYTES):
        chunk = packed[start : start + _LINE_BYTES]
        padded = chunk + b"\0" * (-len(chunk) % 4)
        lines.append(_LENGTHS[len(chunk) - 1] + base64.b85encode(padded).decode("ascii"))
    return BinaryHunk("literal", len(content), tuple(lines))
