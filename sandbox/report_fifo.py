"""Report files a sandboxed runner writes into FIFOs the host reads as the run goes.

A Go or JavaScript runner writes its reports from the same sandbox, as the same user, as the code
under test: no directory the runner can write is one the tests cannot. So the reports are not
files. Each is a FIFO in a directory mounted read-only into the sandbox, with mode 0200 (write
only, even for its owner): the sandbox can open it to write, but cannot open it to read (and so
cannot take the runner's bytes out of it), cannot chmod it (the mount is read-only) and cannot put
a file of its own in its place. The host holds the read end, opened before the run, and a write
end of its own, so a writer's open never blocks and the reader never sees an end of file.

What the host reads is everything any process of the run wrote, in order: a test can add bytes,
never take the runner's away. An XML or JSON report with anything added is no longer one document
and is refused; a Go event stream with lines added is checked line by line (sandbox.outcomes_go).
"""

from __future__ import annotations

import os
import select
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

WRITE_ONLY = 0o200
READ_CHUNK = 65536


@dataclass
class FifoData:
    data: bytes
    # More than the bound was written: the rest was read and dropped, so that no writer blocked.
    truncated: bool = False


class ReportFifos:
    """FIFOs named `names` in `directory` (the host's side of a read-only mount), drained by a thread.

    Each is write-only to the sandbox except those named in `readable`, for a writer that opens its
    file read-write (Vitest's JUnit reporter): a test could then read that one's bytes away.
    """

    def __init__(self, directory: Path, names: tuple[str, ...], max_bytes: int, readable: tuple[str, ...] = ()) -> None:
        self.max_bytes = max_bytes
        self._fds: dict[int, str] = {}
        self._writers: list[int] = []
        self._data: dict[str, bytearray] = {name: bytearray() for name in names}
        self._dropped: dict[str, bool] = dict.fromkeys(names, False)
        self._wake_r = self._wake_w = -1
        try:
            for name in names:
                self._open(directory / name, name, 0o600 if name in readable else WRITE_ONLY)
        except BaseException:
            self._close()
            raise
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="report-fifos", daemon=True)
        self._thread.start()

    def _open(self, path: Path, name: str, mode: int) -> None:
        os.mkfifo(path, 0o600)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._fds[fd] = name
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not the FIFO just made")
        # Our own writer: no end of file (and no busy loop) when the run's writers close.
        self._writers.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
        os.chmod(path, mode)

    def _loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([*self._fds, self._wake_r], [], [], 1.0)
            for fd in ready:
                if fd != self._wake_r:
                    self._take(fd)

    def _take(self, fd: int) -> bool:
        """One read; False when there was nothing to read."""
        try:
            chunk = os.read(fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return False
        name = self._fds[fd]
        kept = self._data[name]
        room = self.max_bytes - len(kept)
        kept += chunk[: max(room, 0)]
        if len(chunk) > room:
            self._dropped[name] = True
        return bool(chunk)

    def finish(self) -> dict[str, FifoData]:
        """After the run (every writer of the sandbox gone): what is left, then each FIFO's bytes."""
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join()
        for fd in list(self._fds):
            while self._take(fd):
                pass
        self._close()
        return {name: FifoData(bytes(data), self._dropped[name]) for name, data in self._data.items()}

    def _close(self) -> None:
        for fd in [*self._fds, *self._writers, self._wake_r, self._wake_w]:
            if fd >= 0:
                os.close(fd)
        self._fds, self._writers = {}, []
        self._wake_r = self._wake_w = -1
