"""Reading a duplicates file in either of its forms, for whatever counts its drops.

The crawl and ``neardup dedup`` write JSON lines (``duplicates.jsonl``, one
record a drop or an avoided request, docs/stats.md); ``neardup dedup --format
parquet`` writes the same records as ``duplicates.parquet``. ``neardup stats
--duplicates`` and ``neardup report`` read both through ``read_records``, so a
file is counted the same way whichever form it came in.

>>> import json, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "duplicates.jsonl")
>>> with open(path, "w") as fh:
...     _ = fh.write(json.dumps({"id": "b", "duplicate_of": "a", "distance": 2}) + "\\nnot json\\n{\\"cut")
>>> list(read_records(path))
[{'id': 'b', 'duplicate_of': 'a', 'distance': 2}, None]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .inputs import _need, kind_of

#: Parquet rows read at a time (memory: one batch)
BATCH = 4096


def read_records(path: str | Path) -> Iterator[dict[str, Any] | None]:
    """Each record of the duplicates file at ``path``, in file order: a dict, or None for a JSON line that
    is not a JSON object. A last JSON line without its newline is not read: a kill cut it short, and the
    run that resumes writes that drop again. Raises ``OSError`` when the file cannot be read, and for a
    Parquet file without pyarrow (``InputError``, a ``ValueError``, naming the extra) or a damaged one
    (``ValueError``). O(records) time, one line or one batch of memory."""
    if Path(path).is_dir():  # (the Spark job's: its part files, in order)
        for part in part_files(Path(path)):
            yield from read_records(part)
        return
    if kind_of(str(path)) == "parquet":
        yield from _parquet_rows(Path(path))
        return
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                record = None
            yield record if isinstance(record, dict) else None


def part_files(directory: Path) -> list[Path]:
    """The part files of a directory a Spark job wrote (``part-*``; not ``_SUCCESS`` nor checksums), in
    order; ``OSError`` for a directory with none (no such output)."""
    parts = sorted(p for p in directory.iterdir() if p.name.startswith("part-") and not p.name.endswith(".crc"))
    if not parts:
        raise OSError(f"{directory}: no part files (part-*) in it")
    return parts


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    _need("pyarrow", f"{path} (Parquet)")
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path} cannot be read as Parquet: {exc}") from None
    for batch in reader.iter_batches(batch_size=BATCH):
        # (a row's null columns are left out, as the JSON lines leave out what a record has not)
        for row in batch.to_pylist():
            yield {k: v for k, v in row.items() if v is not None}
