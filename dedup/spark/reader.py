"""The Spark job's input: JSON lines from any path Spark reads, in input order.

Input order is the one-machine command's: the arguments in the order given,
the files of a directory or glob sorted by path, and the lines of a file by
their byte offset. Spark packs file splits by size, so its partition order is
not input order: each record carries its place as one integer, ``pos`` =
file number << ``OFFSET_BITS`` | byte offset (``position``), and everything
that needs the order sorts or compares by it.

Files are listed through Hadoop's file system API (local paths, ``file://``;
``hdfs://`` and ``s3a://`` with their connector jars, untested here) and read
with Hadoop's ``TextInputFormat``, which splits large files and gives each
line's byte offset (of the uncompressed stream for plain files; a gzip file
is one split, its offsets count the compressed bytes read so far, still
increasing).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)

#: bits of a record's byte offset inside ``pos``: files up to 1 TiB, 2**23 files
OFFSET_BITS = 40
#: names of files a directory contributes
JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")


def position(file_no: int, offset: int) -> int:
    """A record's place in input order."""
    if offset >= 1 << OFFSET_BITS:
        raise ValueError(f"byte offset {offset} past {1 << OFFSET_BITS}")
    return file_no << OFFSET_BITS | offset


def split_position(pos: int) -> tuple[int, int]:
    """(file number, byte offset) of ``pos``."""
    return pos >> OFFSET_BITS, pos & ((1 << OFFSET_BITS) - 1)


def list_inputs(sc: Any, inputs: Sequence[str]) -> list[str]:
    """The input files in input order: each argument in turn; a directory's
    files (recursively, JSON lines by name) and a glob's matches sorted by path."""
    jvm = sc._jvm
    conf = sc._jsc.hadoopConfiguration()
    files: list[str] = []
    for arg in inputs:
        path = jvm.org.apache.hadoop.fs.Path(arg)
        fs = path.getFileSystem(conf)
        statuses = fs.globStatus(path)
        if not statuses:
            raise FileNotFoundError(f"no input matches {arg}")
        found = []
        for st in statuses:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    name = it.next().getPath().toString()
                    if name.endswith(JSONL_SUFFIXES):
                        found.append(name)
            else:
                found.append(st.getPath().toString())
        files.extend(sorted(found))
    return files


def read_lines(sc: Any, files: Sequence[str]) -> Any:
    """RDD of (pos, line) over every line of ``files`` (blank lines left out)."""
    if len(files) >= 1 << (63 - OFFSET_BITS):
        raise ValueError(f"{len(files)} input files: at most {1 << (63 - OFFSET_BITS)}")
    parts = []
    for no, name in enumerate(files):
        rdd = sc.newAPIHadoopFile(name, "org.apache.hadoop.mapreduce.lib.input.TextInputFormat",
                                  "org.apache.hadoop.io.LongWritable", "org.apache.hadoop.io.Text")
        parts.append(rdd.map(lambda kv, no=no: (position(no, kv[0]), kv[1])).filter(lambda r: r[1].strip()))
    return sc.union(parts) if parts else sc.emptyRDD()


def parse_records(lines: Iterable[tuple[int, str]], text_field: str, id_field: str | None
                  ) -> Iterator[tuple[int, str | None, str | None, str | None]]:
    """(pos, id, text, skip reason) per line: a malformed line or one without
    the text field gets a reason and no text. The id defaults to the position."""
    import json

    for pos, line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            yield pos, None, None, "malformed_json"
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get(text_field), str):
            yield pos, None, None, "no_text_field"
            continue
        rid = rec.get(id_field) if id_field else None
        yield pos, (str(rid) if rid is not None else None), rec[text_field], None
