"""How exported rows become bytes: JSONL, Parquet, a Hugging Face `datasets` directory, a tar.

Every writer is a generator that holds one row group (or one file of a tar) at a time, so an
export's memory does not grow with its size; the `export` command writes the pieces to a file
or a directory and the API streams them.

A Hugging Face directory is what `Dataset.save_to_disk` writes and `datasets.load_from_disk`
reads: Arrow IPC stream files, `dataset_info.json` (the features) and `state.json` (the list of
files). It is written as shards of SHARD_ROWS rows, the file list last, because a stream does
not know how many rows it will have.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

# Rows per Parquet row group and per Hugging Face shard: memory holds this many rows at a time.
ROW_GROUP_ROWS = 256
SHARD_ROWS = 512
# The API sends pieces of about this size: fewer, larger writes are what a fast stream needs.
STREAM_CHUNK_BYTES = 256 * 1024

# A file of a directory-shaped export: its path inside the directory, its bytes, its mode.
FilePiece = tuple[str, bytes, int]


class Sink:
    """A write-only file for pyarrow and tarfile; the stream takes what was written after each piece."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.position = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.buffer += data
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def drain(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


def jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    for row in rows:
        yield orjson.dumps(row) + b"\n"


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def parquet(
    rows: Iterable[dict[str, Any]],
    schema: Any,
    to_columns: Callable[[dict[str, Any]], dict[str, Any]],
    group_rows: int = ROW_GROUP_ROWS,
) -> Iterator[bytes]:
    """One Parquet file, written one row group at a time (an empty export is a valid empty file)."""
    import pyarrow as pa  # heavy, and only these writers need it
    import pyarrow.parquet as pq

    sink = Sink()
    writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), schema)  # type: ignore[no-untyped-call]
    wrote = False
    for batch in _batches(rows, group_rows):
        writer.write_table(pa.Table.from_pylist([to_columns(row) for row in batch], schema=schema))
        wrote = True
        yield sink.drain()
    if not wrote:
        writer.write_table(pa.Table.from_pylist([], schema=schema))
    writer.close()
    yield sink.drain()


def hf_files(
    rows: Iterable[dict[str, Any]], schema: Any, to_columns: Callable[[dict[str, Any]], dict[str, Any]]
) -> Iterator[FilePiece]:
    """The files of a `datasets.load_from_disk` directory, shard by shard."""
    import pyarrow as pa
    from datasets import DatasetInfo, Features
    from datasets.utils.py_utils import asdict

    names: list[str] = []
    for batch in _batches(rows, SHARD_ROWS):
        names.append(f"data-{len(names):05d}.arrow")
        yield names[-1], _arrow_stream(pa.Table.from_pylist([to_columns(row) for row in batch], schema=schema)), 0o644
    if not names:
        names.append("data-00000.arrow")
        yield names[-1], _arrow_stream(pa.Table.from_pylist([], schema=schema)), 0o644
    info = DatasetInfo(features=Features.from_arrow_schema(schema))
    yield "dataset_info.json", json.dumps(asdict(info), indent=2).encode(), 0o644
    state: dict[str, Any] = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": None,
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    yield "state.json", json.dumps(state, indent=2).encode(), 0o644


def _arrow_stream(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def tar(files: Iterable[FilePiece], root: str) -> Iterator[bytes]:
    """An uncompressed tar of the files under `root/`, one member at a time."""
    sink = Sink()
    now = int(time.time())
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as archive:  # type: ignore[call-overload]
        for name, content, mode in files:
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size, info.mode, info.mtime = len(content), mode, now
            archive.addfile(info, io.BytesIO(content))
            yield sink.drain()
    yield sink.drain()


def coalesce(pieces: Iterable[bytes], size: int = STREAM_CHUNK_BYTES) -> Iterator[bytes]:
    """Pieces joined up to about `size` bytes, so a stream of small lines is sent in few writes."""
    buffer: list[bytes] = []
    held = 0
    for piece in pieces:
        if not piece:
            continue
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(buffer)
            buffer, held = [], 0
    if buffer:
        yield b"".join(buffer)


def json_text(value: Any) -> str | None:
    """A nested value as JSON text, for a Parquet or Arrow column that cannot hold a union of types."""
    return None if value is None else orjson.dumps(value).decode()
