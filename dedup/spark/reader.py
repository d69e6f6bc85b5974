"""The Spark job's input: every kind the one-machine command reads, in its input order.

Inputs are the one-machine command's (``corpus.inputs``): JSON lines
(``.jsonl``, ``.json``, ``.ndjson``, and their ``.gz`` and ``.zst``), HTML
files, WARC (``.warc``, ``.warc.gz``) and Parquet, from files, directories
and globs. A local path is expanded by ``corpus.inputs.expand_inputs``
itself, so the files, their order and their names (hence the default ids,
``FILE:LINE``) are the one-machine run's. A URI (``hdfs://``, ``s3a://``,
``file://``) is listed through Hadoop's file system API (a directory's
files of a known kind, recursively; a glob's matches), sorted by path, and
named as Hadoop names it (a ``file:`` URI without its scheme).

Input order is the one-machine command's: the arguments in the order given,
a directory's or glob's files sorted by path, and the records of a file in
file order. Spark packs file splits by size, so its partition order is not
input order: each record carries its place as one integer, ``pos`` = file
number << ``OFFSET_BITS`` | its place in the file (``position``), and
everything that needs the order sorts or compares by it.

Two ways in (``read_records``):

- **Plain JSON lines** (not compressed) go through Hadoop's ``TextInputFormat``,
  which splits a large file over several tasks; a record's place is its line's
  byte offset, and its line number (for ``FILE:LINE`` and ``source``) comes
  from a count of each split's lines (one more pass over the text, collected
  as one number a split).
- **Every other kind** (compressed JSON lines, HTML, WARC, Parquet) is read
  whole by one task per file with the one-machine ``corpus.inputs.Reader``; a
  record's place is the reader's locator (line, row, byte offset; 0 for an
  HTML file). A local file is opened where it is; a file of another file
  system is fetched whole by ``binaryFiles`` into a temporary file first.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from ..corpus.inputs import KINDS, InputError, InputFile, RawRecord, Reader, expand_inputs, kind_of

logger = logging.getLogger(__name__)

#: bits of a record's place in its file inside ``pos``: files up to 1 TiB, 2**23 files
OFFSET_BITS = 40
#: what TextInputFormat splits and reads as lines (compressed JSON lines go through the Reader)
SPLIT_SUFFIXES = (".jsonl", ".json", ".ndjson")
#: whitespace of ``bytes.strip()``, which the one-machine reader uses to tell a blank line
_ASCII_SPACE = " \t\n\r\x0b\x0c"


class SparkInput(NamedTuple):
    """One input file: ``name`` as the outputs name it (the one-machine path,
    or a URI without ``file:``), ``kind`` (``corpus.inputs.kind_of``),
    ``location`` (what Hadoop opens: a URI), ``local`` (``location``'s path is
    on this machine's file system: a path given as one), ``size`` in bytes."""

    name: str
    kind: str
    location: str
    local: bool
    size: int

    @property
    def split(self) -> bool:
        """Read as lines by TextInputFormat (splittable), rather than whole by the Reader."""
        return self.kind == "jsonl" and self.name.lower().endswith(SPLIT_SUFFIXES)

    def input_file(self, path: str | None = None) -> InputFile:
        """The one-machine ``InputFile`` (at ``path`` if given: a local copy)."""
        return InputFile(path or self.name, self.kind, self.size)


def position(file_no: int, offset: int) -> int:
    """A record's place in input order."""
    if not 0 <= offset < 1 << OFFSET_BITS:
        raise ValueError(f"place in file {offset} past {1 << OFFSET_BITS}")
    return file_no << OFFSET_BITS | offset


def split_position(pos: int) -> tuple[int, int]:
    """(file number, place in the file) of ``pos``."""
    return pos >> OFFSET_BITS, pos & ((1 << OFFSET_BITS) - 1)


def display_path(name: str) -> str:
    """A URI as the outputs name it: a local file's path without Hadoop's
    ``file:`` scheme; any other file system's URI as it is."""
    if name.startswith("file://"):
        return name.removeprefix("file://")
    return name.removeprefix("file:")


def _is_uri(arg: str) -> bool:
    return "://" in arg


def list_inputs(sc: Any, inputs: Sequence[str]) -> list[SparkInput]:
    """The input files in input order (see the module). Raises ``InputError``
    for an argument that names no file this reads."""
    files: list[SparkInput] = []
    uris: set[str] = set()
    seen: dict[str, str] = {}  # (local files as the one-machine command takes them: one given twice is refused)
    listed: set[str] = set()
    for arg in inputs:
        if not _is_uri(arg):
            for f in expand_inputs([arg], seen=seen, listed_before=listed):
                files.append(SparkInput(f.path, f.kind, "file://" + os.path.abspath(f.path), True, f.size))
            continue
        jvm = sc._jvm
        path = jvm.org.apache.hadoop.fs.Path(arg)
        fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
        statuses = fs.globStatus(path)
        if not statuses:
            raise InputError(f"{arg}: no such file or directory")
        found: list[tuple[str, int]] = []
        for st in statuses:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    status = it.next()
                    name = status.getPath().toString()
                    if kind_of(name):
                        found.append((name, status.getLen()))
            elif kind_of(st.getPath().toString()) is None:
                raise InputError(f"{arg}: not a kind of file this reads")
            else:
                found.append((st.getPath().toString(), st.getLen()))
        if not found:
            raise InputError(f"{arg}: matches no file this reads")
        for uri, size in sorted(found):
            if uri in uris:
                raise InputError(f"{uri}: given twice")
            uris.add(uri)
            kind = kind_of(uri)
            assert kind is not None
            files.append(SparkInput(display_path(uri), kind, uri, False, size))
    if len(files) >= 1 << (63 - OFFSET_BITS):
        raise InputError(f"{len(files)} input files: at most {1 << (63 - OFFSET_BITS)}")
    return files


def _line_rdds(sc: Any, files: Sequence[SparkInput]) -> tuple[Any, list[int]]:
    """(file number, byte offset, line) of every line of the splittable files,
    and the file number of each of its partitions (one partition a split)."""
    # lines end at "\n" only, as the one-machine reader's do (Hadoop's default also ends them at a lone "\r")
    conf = {"textinputformat.record.delimiter": "\n"}
    rdds, owners = [], []
    for no, f in enumerate(files):
        if not f.split:
            continue
        rdd = sc.newAPIHadoopFile(f.location, "org.apache.hadoop.mapreduce.lib.input.TextInputFormat",
                                  "org.apache.hadoop.io.LongWritable", "org.apache.hadoop.io.Text", conf=conf)
        rdds.append(rdd.map(lambda kv, no=no: (no, kv[0], kv[1])))
        owners.extend([no] * rdd.getNumPartitions())
    return (sc.union(rdds) if rdds else None), owners


def read_lines(sc: Any, files: Sequence[SparkInput]) -> Any:
    """RDD of (pos, (line number, line)) over the non-blank lines of the
    splittable files, or None when there are none. Counts each split's lines
    first (one pass, one number a split to the driver) to number them."""
    raw, owners = _line_rdds(sc, files)
    if raw is None:
        return None
    counts = raw.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
    starts, seen = [], dict.fromkeys(owners, 0)
    for no, c in zip(owners, counts):  # a file's splits are its partitions in offset order
        starts.append(seen[no])
        seen[no] += c

    def number(i: int, it: Iterator[tuple[int, int, str]]) -> Iterator[tuple[int, tuple[int, str]]]:
        first = starts[i]
        for j, (no, offset, line) in enumerate(it):
            if line.strip(_ASCII_SPACE):
                yield position(no, offset), (first + j + 1, line)

    return raw.mapPartitionsWithIndex(number)


def read_file(no: int, f: SparkInput, local_path: str | None = None) -> Iterator[tuple[int, RawRecord | str]]:
    """(pos, record) for each record of one file read whole by the one-machine
    ``Reader``; a fault ends the file with (pos past its records, the error's
    message), as the one-machine run names it and goes on."""
    reader = Reader(f.input_file(local_path))
    try:
        for rec in reader.records(0):
            yield position(no, rec.locator), rec
    except InputError as exc:
        message = str(exc)
        if local_path:
            message = message.replace(local_path, f.name)
        yield position(no, (1 << OFFSET_BITS) - 1), message


def _read_fetched(no: int, f: SparkInput, data: bytes) -> Iterator[tuple[int, RawRecord | str]]:
    """``read_file`` over a file of another file system, fetched whole as ``data``."""
    # the name's own ending: the reader tells compressed files by it
    suffix = next(s for s, _ in KINDS if f.name.lower().endswith(s))
    with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
        tmp.write(data)
        tmp.flush()
        yield from read_file(no, f, tmp.name)


def read_whole_files(sc: Any, files: Sequence[SparkInput]) -> Any:
    """RDD of (pos, record or file error) over the files that are not split,
    one task per file; None when there are none."""
    local = [(no, f) for no, f in enumerate(files) if not f.split and f.local]
    parts = []
    if local:
        # (opened by its absolute path: a Python worker need not share the driver's directory)
        parts.append(sc.parallelize(local, len(local)).flatMap(
            lambda nf: read_file(nf[0], nf[1], nf[1].location.removeprefix("file://"))))
    for no, f in enumerate(files):
        if not f.split and not f.local:
            parts.append(sc.binaryFiles(f.location, 1).flatMap(lambda kv, no=no, f=f: _read_fetched(no, f, kv[1])))
    if not parts:
        return None
    return sc.union(parts) if len(parts) > 1 else parts[0]


def read_records(sc: Any, files: Sequence[SparkInput]) -> tuple[Any, Any]:
    """(records, lines): RDD of (pos, ``RawRecord`` or a file error message)
    over every file; and ``read_lines``'s RDD (the splittable files' lines,
    read again for the output, which does not hold them), or None."""
    lines = read_lines(sc, files)
    parts = []
    if lines is not None:
        parts.append(lines.mapValues(lambda nl: RawRecord(nl[1], nl[0], 0)))
    whole = read_whole_files(sc, files)
    if whole is not None:
        parts.append(whole)
    if not parts:
        return sc.emptyRDD(), lines
    return (sc.union(parts) if len(parts) > 1 else parts[0]), lines
