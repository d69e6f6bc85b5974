"""The inputs of a corpus run, as files in order, and each file's records in order.

``expand_inputs`` turns the command's arguments into ``InputFile`` s: the
arguments in the order given, the files of a directory or a glob sorted by
path. ``read_records(file, start)`` yields a file's ``RawRecord`` s from
position ``start`` on (0: its beginning), each with the position after it,
so that a run killed at any point starts again where its checkpoint says:

- JSON lines (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``; also ``.json``,
  ``.ndjson``): one record a line; position: the byte offset after the line in
  the (decompressed) stream, and the line number. A compressed file is read
  again from its start and skipped up to the position (decompression is
  sequential).
- HTML files (``.html``, ``.htm``, ``.html.gz``, ``.htm.gz``): one record a
  file; position 0 or 1.
- Parquet (``.parquet``, needs pyarrow): one record a row; position: the row.
- WARC (``.warc``, ``.warc.gz``, needs warcio): one record a response record;
  position: the record's byte offset in the file. Other records are skipped
  and counted (``skip``).

A file that cannot be read, or ends early (a truncated ``.gz``), raises
``InputError`` from ``read_records`` after the records read before the fault;
the run names it and goes on with the next file.
"""

from __future__ import annotations

import base64
import codecs
import datetime
import glob
import gzip
import io
import json
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

#: file name endings of each kind, longest first where one ends another
KINDS: tuple[tuple[str, str], ...] = (
    (".jsonl.gz", "jsonl"), (".jsonl.zst", "jsonl"), (".ndjson.gz", "jsonl"), (".ndjson.zst", "jsonl"),
    (".json.gz", "jsonl"), (".json.zst", "jsonl"), (".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"),
    (".html.gz", "html"), (".htm.gz", "html"), (".html", "html"), (".htm", "html"), (".xhtml", "html"),
    (".parquet", "parquet"), (".warc.gz", "warc"), (".warc", "warc"),
)

#: what a corpus file needs beyond the core dependencies: (module, extra)
NEEDS = {".zst": ("zstandard", "corpus"), "parquet": ("pyarrow", "corpus"), "warc": ("warcio", "corpus")}


class InputError(Exception):
    """An input that cannot be read (its message names the file and what is wrong)."""


def kind_of(path: str) -> str | None:
    """The kind of file ``path`` names by its ending (``jsonl``, ``html``, ``parquet``, ``warc``), or None."""
    low = path.lower()
    for suffix, kind in KINDS:
        if low.endswith(suffix):
            return kind
    return None


@dataclass(frozen=True, slots=True)
class InputFile:
    path: str
    kind: str
    size: int


def _rows(batch: Any) -> list[dict[str, Any] | str]:
    """A Parquet batch's rows as dicts; a row Python cannot hold is the reason, a string. A nanosecond
    timestamp or time that a ``datetime`` cannot hold (what pandas writes), where pandas is not installed,
    is its ISO 8601 string with nine digits, as pandas' ``Timestamp.isoformat`` gives it; the column's
    other values stay ``datetime``s, as in every other batch (``to_pylist`` refused the whole batch for one
    such value: 1,024 rows, and the file's rest). O(rows)."""
    import pyarrow as pa

    try:
        return batch.to_pylist()
    except (pa.ArrowException, ValueError, OverflowError):
        pass
    names = batch.schema.names
    ns = {i for i, col in enumerate(batch.columns)
          if (pa.types.is_timestamp(col.type) or pa.types.is_time(col.type)) and col.type.unit == "ns"}
    values = {i: _ns_values(batch.column(i)) for i in ns}
    rest = [i for i in range(len(names)) if i not in ns]
    try:
        others = pa.RecordBatch.from_arrays([batch.column(i) for i in rest], names=[names[i] for i in rest]).to_pylist()
        return [{name: values[i][r] if i in ns else others[r][name] for i, name in enumerate(names)}
                for r in range(batch.num_rows)]
    except (pa.ArrowException, ValueError, OverflowError):
        pass
    rows: list[dict[str, Any] | str] = []
    for r in range(batch.num_rows):  # (one by one: only the rows that cannot be held are lost)
        try:
            row = batch.slice(r, 1).to_pylist()[0]
        except (pa.ArrowException, ValueError, OverflowError) as exc:
            rows.append(f"{type(exc).__name__}: {exc}")
            continue
        rows.append(row)
    return rows


def _ns_values(col: Any) -> list[Any]:
    """A nanosecond timestamp or time column's values: ``datetime``/``time`` where they hold it (a whole
    microsecond), else the ISO 8601 string with nine digits of the second."""
    import pyarrow as pa

    ints = col.cast(pa.int64()).to_pylist()
    micro = pa.array([None if v is None else v // 1000 for v in ints],
                     type=pa.timestamp("us", tz=col.type.tz) if pa.types.is_timestamp(col.type) else pa.time64("us"))
    out: list[Any] = []
    for v, held in zip(ints, micro.to_pylist()):
        if v is None or v % 1000 == 0:
            out.append(held)
            continue
        naive = held.replace(tzinfo=None).isoformat(timespec="microseconds")
        out.append(naive + f"{v % 1000:03d}" + held.isoformat(timespec="microseconds")[len(naive):])
    return out


@dataclass(slots=True)
class RawRecord:
    """One record as read, before parsing: ``payload`` is a JSON line's bytes
    (as they came, with its newline), an HTML file's bytes, a WARC response's
    HTTP body, or a Parquet row (a dict). ``locator``: the line number (JSON
    lines, from 1), the row (Parquet, from 0), the byte offset (WARC), or 0
    (an HTML file). ``end``: the file position after the record."""

    payload: Any
    locator: int
    end: int
    url: str | None = None
    record_id: str | None = None
    skip: str | None = None  # not a record: why (a non-HTML WARC record)
    bad: str | None = None  # a record that could not be read: why (a Parquet row Python cannot hold)

    @property
    def sent(self) -> bool:
        """Whether the record goes to be fingerprinted: neither skipped nor bad."""
        return self.skip is None and self.bad is None


def source_of(file: InputFile, rec: RawRecord) -> dict[str, Any]:
    """Where a record is, as the duplicates file and the bad-record list name it:
    its file and its line (JSON lines), row (Parquet) or byte offset (WARC)."""
    where = {"jsonl": "line", "parquet": "row", "warc": "offset"}.get(file.kind)
    return {"file": file.path, where: rec.locator} if where else {"file": file.path}


def default_id(file: InputFile, rec: RawRecord) -> str:
    """A record's id when the input names none (no ``--id-field``): ``FILE:LINE``,
    ``FILE:ROW``, the WARC record's id (else ``FILE@OFFSET``), or an HTML file's path.
    One machine and the Spark job give the same."""
    if file.kind in ("jsonl", "parquet"):
        return f"{file.path}:{rec.locator}"
    if file.kind == "warc":
        return rec.record_id or f"{file.path}@{rec.locator}"
    return file.path


def positional_id(file: InputFile, rec: RawRecord) -> bool:
    """Whether ``default_id`` names the record by where it is (``FILE:LINE``, ``FILE:ROW``,
    ``FILE@OFFSET``), not by what it is (a WARC record's id, an HTML file's path): another
    run's file of that name may hold another record there, so ``--store`` never takes a
    stored record of that id for the record itself."""
    return file.kind in ("jsonl", "parquet") or (file.kind == "warc" and not rec.record_id)


def expand_inputs(args: list[str], out: str | os.PathLike[str] | None = None,
                  seen: dict[str, str] | None = None, listed_before: set[str] | None = None) -> list[InputFile]:
    """The files the arguments name, in order: a file as given (its path normalised), a directory's
    files of a known kind sorted by path (recursively), a glob's matches sorted.
    Files under ``out`` (the run's own outputs and state) are never inputs: a
    directory or a glob leaves them out, and a file named there is refused.
    ``seen``: the files named so far (real path -> as given), for a caller that expands its
    arguments one at a time, with ``listed_before``, those of them a directory or a glob listed; a
    file named twice is refused either way, and one a directory or a glob lists as well (in either
    order) is read once, where it comes first, with a warning.
    Raises ``InputError`` for an argument that names nothing, or a file of no known kind."""
    inside = _under(out)
    seen = {} if seen is None else seen  # real path -> as given (a caller's, across its calls)
    listed_before = set() if listed_before is None else listed_before  # (of those, a listing's)
    found: list[str]
    files: list[InputFile] = []
    for arg in args:
        if os.path.isdir(arg):
            if inside(Path(arg)):  # (every file it has would be left out: "no file this reads" misled)
                raise InputError(f"{arg}: the output directory {out}, or inside it; an input cannot be one of the "
                                 "run's own files: name another -o")
            # (a link to nothing is listed too: skipped here, a file of the corpus went missing without a word;
            # read, it is named in file_errors)
            found = sorted(str(p) for p in Path(arg).rglob("*")
                           if (p.is_file() or (p.is_symlink() and not p.exists())) and kind_of(p.name)
                           and not inside(p))
            if not found:
                raise InputError(f"{arg}: a directory with no file this reads (.jsonl, .html, .parquet, .warc...)")
        elif os.path.exists(arg):
            if kind_of(arg) is None:
                raise InputError(f"{arg}: not a kind of file this reads ({', '.join(s for s, _ in KINDS)})")
            if inside(Path(arg)):
                raise InputError(f"{arg}: inside the output directory {out}; an input cannot be one of the run's "
                                 "own files")
            found = [arg]
        elif glob.has_magic(arg):
            found = sorted(p for p in glob.glob(arg, recursive=True)
                           if os.path.isfile(p) and kind_of(p) and not inside(Path(p)))
            if not found:
                raise InputError(f"{arg}: matches no file this reads")
        else:
            raise InputError(f"{arg}: no such file or directory")
        listed = found != [arg]  # (a directory's or a glob's files, not a file named as such)
        # (a link to a file listed too is left for that file, wherever the link sorts)
        linked = {os.path.realpath(p): os.path.normpath(p) for p in found if not os.path.islink(p)} if listed else {}
        for path in found:
            # (as the ids name it, FILE:LINE, and as a resumed run is recognised: `./in/a.jsonl`, `in//a.jsonl`
            # and `in/a.jsonl` are one name)
            path = os.path.normpath(path)
            kind = kind_of(path)
            assert kind is not None
            real = os.path.realpath(path)
            if listed and os.path.islink(path) and (real in seen or real in linked):
                logger.warning("%s is a link to %s, read as that file: read once", path, seen.get(real) or linked[real])
                continue
            if real in seen and (listed or real in listed_before):
                # (named and listed by a directory or a glob, in either order: read once, where it came first)
                logger.warning("%s is named and listed (as %s before): read once, there", path, seen[real])
                continue
            if real in seen:  # (its records would all be named duplicates of themselves, under the same ids)
                raise InputError(f"{path}: given twice (as {seen[real]} before)")
            seen[real] = path
            if listed:
                listed_before.add(real)
            files.append(InputFile(path, kind, os.path.getsize(path) if os.path.exists(path) else 0))
    return files


def _under(out: str | os.PathLike[str] | None) -> Any:
    """A test of whether a path lies under directory ``out`` (always False without one)."""
    if out is None:
        return lambda path: False
    root = Path(out).resolve()
    return lambda path: Path(path).resolve().is_relative_to(root)


def _need(module: str, what: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise InputError(f"{what} needs {module}: pip install 'scrapy-neardup[corpus]'") from None


def open_text_stream(path: str, raw: IO[bytes]) -> IO[bytes]:
    """The decompressed byte stream of a JSON lines file opened as ``raw``."""
    low = path.lower()
    if low.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if low.endswith(".zst"):
        zstd = _need("zstandard", f"{path} (zstd)")
        return _ZstdFrames(zstd.ZstdDecompressor(), raw)  # type: ignore[return-value]
    return raw


class _ZstdFrames(io.RawIOBase):
    """The frames of a zstd stream one after another, and ``EOFError`` when the file ends inside a
    frame (zstandard's ``stream_reader`` ends there quietly, so a truncated ``.zst`` read as a
    shorter file, where a truncated ``.gz`` is named as one). The decompressor is given ``FEED``
    bytes at a time: zstd inflates a few bytes into up to 128 KB (a block of one repeated byte), so a
    larger piece could make hundreds of MB at once; this bounds what one step makes to a few MB."""

    CHUNK = 1 << 16  # read from the file at a time
    FEED = 256  # given to the decompressor at a time: at most ~64 blocks, ~8 MB out

    def __init__(self, dctx: Any, raw: IO[bytes]) -> None:
        self._dctx, self._raw = dctx, raw
        self._obj = dctx.decompressobj()
        self._started = False  # the current frame has had input
        self._in, self._in_at = b"", 0  # read from the file, and how much of it was given
        self._out, self._at = b"", 0  # decompressed, and how much of it was read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == len(self._out):
            self._out, self._at = b"", 0
            if self._in_at == len(self._in):
                self._in, self._in_at = self._raw.read(self.CHUNK), 0
                if not self._in:
                    if self._started and not self._obj.eof:
                        raise EOFError("the zstd stream ends inside a frame")
                    return 0
            if self._obj.eof:  # the next frame
                self._obj, self._started = self._dctx.decompressobj(), False
            piece = self._in[self._in_at:self._in_at + self.FEED]
            self._in_at += len(piece)
            self._started = True
            self._out = self._obj.decompress(piece)
            if self._obj.eof and self._obj.unused_data:  # (a frame ended inside the piece: the rest is the next's)
                self._in_at -= len(self._obj.unused_data)
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = memoryview(self._out)[self._at:self._at + n]
        self._at += n
        return n


class Reader:
    """Reads one file's records from a position; ``raw_position`` is how far
    into the file on disk it has read (for a progress bar)."""

    def __init__(self, file: InputFile) -> None:
        self.file = file
        self._raw: IO[bytes] | None = None

    @property
    def raw_position(self) -> int:
        try:
            return self._raw.tell() if self._raw is not None and not self._raw.closed else self.file.size
        except (OSError, ValueError):
            return 0

    def records(self, start: int, start_line: int = 0) -> Iterator[RawRecord]:
        """Records from file position ``start``; ``start_line``: the number of
        lines before it (JSON lines)."""
        kind = self.file.kind
        try:
            if kind == "jsonl":
                yield from self._jsonl(start, start_line)
            elif kind == "html":
                if start == 0:
                    with open(self.file.path, "rb") as fh:
                        data = fh.read()
                    if self.file.path.lower().endswith(".gz"):
                        data = gzip.decompress(data)
                    yield RawRecord(data, 0, 1)
            elif kind == "parquet":
                yield from self._parquet(start)
            else:
                yield from self._warc(start)
        except InputError:
            raise
        except (OSError, EOFError, ValueError, RuntimeError) as exc:  # unreadable, truncated, corrupt
            raise InputError(f"{self.file.path}: {_describe(exc)}") from exc
        except Exception as exc:  # a decompressor's or a parser's own error type
            raise InputError(f"{self.file.path}: {_describe(exc)}") from exc
        finally:
            if self._raw is not None:
                self._raw.close()

    def _jsonl(self, start: int, line_no: int) -> Iterator[RawRecord]:
        self._raw = raw = open(self.file.path, "rb")  # noqa: SIM115 (closed by records())
        stream = open_text_stream(self.file.path, raw)
        pos = 0
        if start:
            if stream is raw:
                raw.seek(start)
            else:  # sequential: read and drop up to the position
                left = start
                while left:
                    got = stream.read(min(left, 1 << 20))
                    if not got:
                        raise InputError(f"{self.file.path}: shorter than the position {start} a checkpoint names")
                    left -= len(got)
            pos = start
        # (small reads from a decompressor: the lines before a fault in a truncated file are still read)
        buffered: IO[bytes] = io.BufferedReader(stream, 1 << 13) if stream is not raw else raw  # type: ignore[type-var]
        for line in buffered:
            pos += len(line)
            line_no += 1
            if line_no == 1 and line.startswith(codecs.BOM_UTF8):
                # (a byte order mark opens the file, not its first record: copied into unique.jsonl it would
                # sit mid-file, where a JSON reader refuses the line)
                line = line[len(codecs.BOM_UTF8):]
            if line.strip():
                yield RawRecord(line, line_no, pos)

    def _parquet(self, start: int) -> Iterator[RawRecord]:
        _need("pyarrow", f"{self.file.path} (Parquet)")
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.file.path)
        row = 0
        for batch in pf.iter_batches(batch_size=1024):
            if row + batch.num_rows <= start:
                row += batch.num_rows
                continue
            for rec in _rows(batch):
                if row >= start:
                    yield RawRecord(rec, row, row + 1) if isinstance(rec, dict) else \
                        RawRecord(None, row, row + 1, bad=f"unreadable row: {rec}")
                row += 1

    def _warc(self, start: int) -> Iterator[RawRecord]:
        _need("warcio", f"{self.file.path} (WARC)")
        from warcio.archiveiterator import ArchiveIterator

        self._raw = raw = open(self.file.path, "rb")  # noqa: SIM115 (closed by records())
        raw.seek(start)
        it = ArchiveIterator(raw)
        # A record's end is where the next one starts (warcio's offsets are the file's own, and its
        # lengths leave out the blank lines between records): so it is yielded once the next is met,
        # and a resumed run starts at a record's first byte.
        box: list[RawRecord | None] = [None]
        try:
            yield from self._warc_records(it, box)
        except Exception as exc:
            # (a fault reading the next record, such as a gzip member cut short: the record before it is
            # whole, and goes first, ending where warcio says it does)
            if box[0] is not None:
                yield box[0]
            if isinstance(exc, (AttributeError, TypeError, IndexError)):  # (warcio's, on a header cut short)
                raise self._damaged(f"a record's header cannot be read ({type(exc).__name__}: {exc})") from exc
            raise
        if box[0] is not None:
            own_end = box[0].end
            box[0].end = self.file.size
            yield box[0]
            # (warcio ends quietly at a header cut short before its blank line: what follows the last whole
            # record must be the blank lines that end it, else records were lost without a word)
            with open(self.file.path, "rb") as fh:
                fh.seek(own_end)
                tail = fh.read(65536)
            if not self.file.path.lower().endswith(".gz"):  # (a plain file's records end with blank lines)
                tail = tail.strip()
            if tail:
                raise self._damaged(f"{self.file.size - own_end} bytes after its last whole record are no record")

    def _damaged(self, why: str) -> InputError:
        """The error of a WARC file cut short, or damaged, where warcio says nothing of it: ``why``."""
        return InputError(f"{self.file.path}: ends early (truncated?) or is damaged: {why}")

    def _warc_records(self, it: Any, box: list[RawRecord | None]) -> Iterator[RawRecord]:
        """``_warc``'s records but the last, each once the next is met; the last (or the one read
        before a fault) is left in ``box``, its ``end`` where warcio says it ends."""
        for rec in it:
            if rec.rec_headers.get_header("Content-Length") is None:
                # (every WARC record has one: a header without it was cut short, and warcio read the rest of
                # the file, if any, as that record's: its records were lost without a word)
                raise self._damaged("a record's header has no Content-Length")
            content_type = (rec.http_headers.get_header("Content-Type") or "") if rec.http_headers else ""
            uri = rec.rec_headers.get_header("WARC-Target-URI")
            rid = rec.rec_headers.get_header("WARC-Record-ID")
            # (the body first: asking the iterator for the offset reads the record to its end)
            body = rec.content_stream().read() if rec.rec_type == "response" else b""
            it.read_to_end()
            offset = it.get_record_offset()
            pending, box[0] = box[0], None
            if pending is not None:
                pending.end = offset
                yield pending
            # (a record cut short by the end of the file: its block is shorter than its Content-Length says;
            # warcio reads what there is without a word)
            left = getattr(rec.raw_stream, "limit", 0)
            if left:
                raise InputError(f"{self.file.path}: ends early (truncated?): the record at offset {offset} "
                                 f"lacks {left} of its {rec.length} bytes")
            own_end = offset + it.get_record_length()
            if rec.rec_type != "response":
                box[0] = RawRecord(None, offset, own_end, uri, rid, skip=f"warc {rec.rec_type} record")
            elif (status := _status(rec)) is not None and not _a_page(status):
                box[0] = RawRecord(None, offset, own_end, uri, rid, skip=f"warc response status {status}")
            elif "html" not in content_type.lower() and content_type:
                box[0] = RawRecord(None, offset, own_end, uri, rid, skip="warc response not HTML")
            else:
                box[0] = RawRecord(body, offset, own_end, uri, rid)


def _status(rec: Any) -> int | None:
    """A WARC response record's HTTP status (None: no HTTP headers, or none that reads)."""
    try:
        return int(rec.http_headers.get_statuscode()) if rec.http_headers else None
    except (TypeError, ValueError):
        return None


def _a_page(status: int) -> bool:
    """Whether a response of this status is the page at its URL, as the crawl takes one (an error page,
    a redirect's body, a partial or empty answer is not: it is skipped and counted, as the crawl skips
    error pages; such a record had been kept, and a real page dropped as a duplicate of a 404)."""
    return 200 <= status < 300 and status not in (204, 205, 206)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return f"ends early (truncated?): {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot be read: {exc.strerror}"
    return f"cannot be read: {type(exc).__name__}: {exc}"


def json_line(record: dict[str, Any]) -> bytes:
    """One output JSON line (UTF-8, newline-terminated) of ``record``. A lone
    surrogate (a JSON input may escape one: ``"\\ud800"``) has no UTF-8: such a
    line is written with every character beyond ASCII escaped, as JSON allows,
    so it reads back as the same string. A float that is not finite (a Parquet
    row's NaN), which JSON cannot hold, is written as ``null``."""
    try:
        text = json.dumps(record, ensure_ascii=False, default=_json_value, allow_nan=False)
    except ValueError:  # (NaN or an infinity; UnicodeEncodeError is not raised by dumps)
        record = _finite(record)
        text = json.dumps(record, ensure_ascii=False, default=_json_value)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(record, ensure_ascii=True, default=_json_value) + "\n").encode()


def _json_value(value: Any) -> Any:
    """A Parquet value JSON has no type for, as Spark's JSON writer gives it: bytes in
    base64, a date or time in ISO 8601, anything else (a decimal) as its string."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (datetime.date, datetime.time)):  # (datetime is a date)
        return value.isoformat()
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with each float that is not finite as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
