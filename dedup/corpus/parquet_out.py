"""``--format parquet``: a finished run's outputs as Parquet files (needs pyarrow, the ``corpus`` extra).

A run writes its outputs as JSON lines first (resumable: each is cut back to
its checkpoint after a kill), in ``OUT/.neardup/``; when it is done, these
turn them into ``OUT/unique.parquet`` and ``OUT/duplicates.parquet``, each by
a temporary file and a rename, so a run killed while converting converts
again when started again.

- ``unique.parquet``: when every input is Parquet, the kept rows with the
  inputs' own columns and types (read again from the inputs, a batch at a
  time: the run notes only the file and row of each kept record); otherwise
  the columns ``id``, ``url``, ``title``, ``text`` (for JSON lines: the text
  field, or the visible text of the HTML field).
- ``duplicates.parquet``: the duplicates file's schema (docs/stats.md), one
  row a drop, with ``source`` a struct of ``file`` and ``line``/``row``/``offset``.

Memory: one input batch (Parquet) or ``CHUNK`` output rows at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .inputs import InputError, InputFile, _need
from .jobs import SURROGATE

#: output rows converted at a time
CHUNK = 10_000


def _pyarrow() -> Any:
    _need("pyarrow", "--format parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for line in fh:
            yield _valid(json.loads(line))


def _valid(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings as U+FFFD: a Parquet string is UTF-8, which cannot
    hold one (the JSON lines escape it)."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: _valid(v) for k, v in value.items()}
    return value


def _chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def text_schema() -> Any:
    pa, _ = _pyarrow()
    return pa.schema([("id", pa.string()), ("url", pa.string()), ("title", pa.string()), ("text", pa.string())])


def duplicates_schema() -> Any:
    pa, _ = _pyarrow()
    source = pa.struct([("file", pa.string()), ("line", pa.int64()), ("row", pa.int64()), ("offset", pa.int64())])
    return pa.schema([("id", pa.string()), ("duplicate_of", pa.string()), ("distance", pa.int8()),
                      ("fingerprint", pa.string()), ("duplicate_of_fingerprint", pa.string()),
                      ("url", pa.string()), ("source", source)])


def _schemas(files: list[InputFile]) -> Iterator[tuple[InputFile, Any]]:
    """(file, its columns) of each of ``files`` that can be read; the others (unreadable or truncated) are
    named in the run's file_errors."""
    _, pq = _pyarrow()
    for file in files:
        try:
            yield file, pq.ParquetFile(file.path).schema_arrow
        except Exception:
            continue


def check_same_columns(files: list[InputFile]) -> None:
    """Raise ``InputError`` unless every Parquet file of ``files`` has the first's columns and types (what
    ``write_unique`` needs of the inputs whose rows it keeps): said before the run, not after it."""
    first = None
    for file, schema in _schemas(files):
        if first is None:
            first = (file, schema)
        elif not schema.equals(first[1]):
            raise InputError(f"{file.path}: other columns than {first[0].path}'s; --format parquet keeps the "
                             "inputs' columns, so every Parquet input must have the same")


def check_fields(files: list[InputFile], field: str | None) -> None:
    """Raise ``InputError`` when a Parquet file of ``files`` has no column ``field`` (the text or HTML field:
    its schema says so before any row is read, where each row would be a bad record); None: nothing to check."""
    for file, schema in _schemas([f for f in files if f.kind == "parquet"] if field else []):
        if field not in schema.names:
            raise InputError(f"{file.path}: no column {field!r} (its columns: {', '.join(schema.names[:20])})")


def write_unique(part: Path, files: list[InputFile], out: Path, rows_of_inputs: bool) -> int:
    """``unique.parquet`` from ``part`` (a line per kept record: ``{"f": file index,
    "r": row}`` when ``rows_of_inputs``, else ``{"id", "url", "title", "text"}``).
    Returns the rows written."""
    if not rows_of_inputs:
        return _lines_to_parquet(part, out, text_schema())
    pa, pq = _pyarrow()
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    kept: dict[int, list[int]] = {}
    for ref in _lines(part):
        kept.setdefault(int(ref["f"]), []).append(int(ref["r"]))
    schema = next((schema for _, schema in _schemas(files)), None) or text_schema()
    with pq.ParquetWriter(tmp, schema) as writer:
        for fi, file in enumerate(files):
            rows = kept.get(fi)
            if not rows:
                continue
            pf = pq.ParquetFile(file.path)
            if not pf.schema_arrow.equals(schema):
                raise InputError(f"{file.path}: other columns than {files[0].path}'s; --format parquet keeps the "
                                 "inputs' columns, so every Parquet input must have the same")
            at = 0  # rows is sorted (input order): a cursor over it, batch by batch
            first = 0
            for batch in pf.iter_batches(batch_size=65_536):
                end = first + batch.num_rows
                stop = at
                while stop < len(rows) and rows[stop] < end:
                    stop += 1
                if stop > at:
                    writer.write_batch(batch.take(pa.array([r - first for r in rows[at:stop]], type=pa.int64())))
                    written += stop - at
                    at = stop
                first = end
        if not written:
            writer.write_table(schema.empty_table())
    os.replace(tmp, out)
    return written


def write_duplicates(source: Path, out: Path) -> int:
    """``duplicates.parquet`` from the run's duplicates lines. Returns the rows written."""
    return _lines_to_parquet(source, out, duplicates_schema())


def _lines_to_parquet(source: Path, out: Path, schema: Any) -> int:
    """``out`` (by a temporary file and a rename) from the JSON lines of ``source``,
    ``CHUNK`` rows at a time, as ``schema``'s columns. Returns the rows written."""
    pa, pq = _pyarrow()
    tmp = out.with_name(out.name + ".tmp")
    written = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for chunk in _chunks(_lines(source)):
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            written += len(chunk)
        if not written:
            writer.write_table(schema.empty_table())
    os.replace(tmp, out)
    return written
