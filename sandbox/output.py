"""Bounded capture of a command's output: the head and the tail, never all of it."""

from __future__ import annotations

from collections import deque


class BoundedBuffer:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest.

    Errors usually show at the start (the command line, the first traceback) and at
    the end (the summary), so both ends are kept and the middle is dropped.
    """

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def append(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_limit:
            self.tail_size -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        tail = b"".join(self.tail)
        if len(tail) > self.tail_limit:
            tail = tail[-self.tail_limit :]
        if self.truncated:
            dropped = self.total - len(self.head) - len(tail)
            marker = f"\n[... {dropped} bytes of output omitted ...]\n".encode()
            return (bytes(self.head) + marker + tail).decode("utf-8", "replace")
        return (bytes(self.head) + tail).decode("utf-8", "replace")
