"""Local feed files written exactly once across kills: the feeds' side of the durable frontier.

With ``JOBDIR``, the add-on makes ``DurableFeedStorage`` Scrapy's storage for
local feed files (``FEED_STORAGES`` for ``file://`` and plain paths; a
project's own entry wins). Each feed file it opens for Scrapy's own JSON
lines, JSON, CSV or XML exporter is recorded in the frontier's ``feeds``
table: where the document this crawl writes begins (``doc_start``), the end
of the last item whose request is acknowledged (``committed``), and what the
exporter writes before the first item and after the last. ``committed`` is
written in the same SQLite transaction as the acknowledgements, so after a
SIGKILL the file's first ``committed`` bytes hold exactly the items of the
acknowledged requests; the bytes after them are items of requests the
resume fetches again, or a line the kill cut short, and are cut off:

* when the frontier opens again, every feed file written since it last
  opened is cut to ``committed`` and its document closed (``]`` for JSON,
  ``</items>`` for XML), so a feed with a new file per run is one valid
  document after any number of kills;
* when the same file is opened again to append to (``-o``), it is cut to
  ``committed`` and the new exporter's opening (``[``, the XML declaration
  and root element, the CSV header row) is left out, so the file stays one
  document (JSON: ``,`` joins the new items to the old).

An item's bytes belong to the request whose response yielded it (told by
``item_scraped``, which Scrapy sends after the feed exporter has written the
item). ``committed`` moves past an item only in the commit that
acknowledges its request, and a request is acknowledged only once
``committed`` covers its items, so a request whose items follow another's
unacknowledged items waits for it (``FeedLedger.settle``).

Other storages (stdout, S3, FTP...), post-processed (gzip) and batched feeds
and exporters other than Scrapy's four stay at-least-once: their files are
flushed before an acknowledgement (``FlushGate``), and the items of the
requests in flight at a kill are written again after the resume.

Costs: per item, a tuple per feed file until its request is acknowledged;
per commit, one flush and one row update per feed file whose offset moved.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exporters import CsvItemExporter, JsonItemExporter, JsonLinesItemExporter, XmlItemExporter
from scrapy.extensions.feedexport import FileFeedStorage
from scrapy.utils.misc import build_from_crawler, load_object

from .acks import response_id
from .db import FeedRow, FrontierDB
from .stop import stop_for_failed_write

logger = logging.getLogger(__name__)

#: Scrapy's exporters whose files this module knows how to cut and continue (by exact class:
#: a subclass may write anything)
KINDS: dict[type, str] = {JsonLinesItemExporter: "jsonlines", JsonItemExporter: "json",
                          XmlItemExporter: "xml", CsvItemExporter: "csv"}


@dataclass(frozen=True)
class Shape:
    """What a feed's exporter writes around its items."""

    kind: str
    header: bytes  # before the first item (start_exporting)
    closer: bytes  # after the last (finish_exporting)
    separator: bytes  # before every item but the first (JSON's ",")
    csv_header: bool  # the first item comes after a CSV header row


def shape_of(crawler: Crawler, feed_options: dict[str, Any]) -> Shape | None:
    """The shape of the feed ``feed_options`` describe, or None if it cannot be
    written exactly once (another exporter, post-processing, batches). The
    exporter is built once on a buffer, with the feed's options, to see it."""
    if feed_options.get("postprocessing") or feed_options.get("batch_item_count"):
        return None
    try:
        cls = load_object(crawler.settings.getwithbase("FEED_EXPORTERS")[feed_options["format"]])
    except (KeyError, ImportError, NameError, ValueError):
        return None
    kind = KINDS.get(cls)
    if kind is None:
        return None
    buf = io.BytesIO()
    probe = build_from_crawler(cls, crawler, buf, fields_to_export=feed_options.get("fields"),
                               encoding=feed_options.get("encoding"), indent=feed_options.get("indent"),
                               **feed_options.get("item_export_kwargs", {}))
    probe.start_exporting()
    header = buf.getvalue()
    probe.finish_exporting()
    closer = buf.getvalue()[len(header):]
    separator = b"," + (b"\n" if probe.indent is not None else b"") if kind == "json" else b""
    return Shape(kind, header, closer, separator, kind == "csv" and bool(getattr(probe, "include_headers_line", 0)))


def _is_empty_document(path: str, size: int, shape: Shape) -> bool:
    """Whether the file at ``path`` (``size`` bytes) holds just an empty document of
    ``shape`` (its exporter's opening and closing, no item). O(size), and size is small."""
    empty = shape.header + shape.closer
    if not empty or size != len(empty):
        return False
    with open(path, "rb") as fh:
        return fh.read() == empty


class FeedFile(io.RawIOBase):
    """The file an exporter writes to: counts the bytes, and when the document
    goes on from an earlier run, leaves out the exporter's opening (and puts
    JSON's separator before the first new item)."""

    def __init__(self, fh: IO[bytes], path: str, pos: int, *, drop: bytes = b"", separator: bytes = b"",
                 skip_row: bytes | None = None, capture_row: bool = False) -> None:
        super().__init__()
        self._fh = fh
        self.path = path
        self.pos = pos  # the file's size once everything written is flushed
        self._drop = drop  # the new exporter's opening, already in the file
        self._separator = separator
        self._skip_row = skip_row  # the CSV header row the document already has
        self._capture_row = capture_row
        self.csv_header: bytes | None = None  # a new CSV document's header row, once written
        self.earlier_csv_header = skip_row  # (the document's header row, for its columns: ``csv_fields``)
        self.failed = False  # a write raised: nothing past ``committed`` may be trusted

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        n = len(data)
        if self._drop:
            k = min(len(self._drop), n)
            if data[:k] == self._drop[:k]:
                self._drop, data = self._drop[k:], data[k:]
            else:  # (not what the exporter wrote before: written as it is)
                logger.warning("feed %s: the exporter does not open the document as it did before; "
                               "the file may not be one valid document", self.path)
                self._drop = b""
            if not data:
                return n
        if self._skip_row is not None:  # a CSV write is a row; the first is the header row
            row, self._skip_row = self._skip_row, None
            if data == row:
                return n
            logger.warning("feed %s: the CSV columns differ from the earlier run's; a second header row "
                           "is written", self.path)
        if self._capture_row:
            self._capture_row = False
            self.csv_header = data
        if self._separator:
            # JSON: an item (an object) follows the earlier items; the closing "]" (no new
            # item at all, with FEED_STORE_EMPTY) does not
            if data[:1] in (b"{", b"["):
                data = self._separator + data
            self._separator = b""
        try:
            self._fh.write(data)
        except OSError:
            # (a full disk: how much of the item reached the file is unknown, and Scrapy's signal
            # dispatcher only logs the error; the ledger stops the crawl at its next commit)
            self.failed = True
            raise
        self.pos += len(data)
        return n

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self.closed:
            try:
                self._fh.close()
            finally:
                super().close()


@dataclass
class _Open:
    """A feed file written in this run, and the items whose requests are not acknowledged yet."""

    file: FeedFile
    committed: int
    noted: int
    pending: deque[tuple[int, int | None]] = field(default_factory=deque)  # (end offset, frontier id)
    csv_header_saved: bool = False


class FeedLedger:
    """The crawl's record of its local feed files (``FeedLedger.of(crawler)``);
    used by the crawl's thread only. ``attach`` (the scheduler's ``open``)
    cuts and closes the files of the last run; ``settle`` (each frontier
    commit) moves each file's committed offset."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.db: FrontierDB | None = None
        self.detached = False  # the frontier has closed (the crawl is closing)
        self.failed = False  # a feed file could not be written: nothing is committed any more
        self._files: dict[str, _Open] = {}
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)

    @classmethod
    def of(cls, crawler: Crawler) -> FeedLedger:
        ledger = _BY_CRAWLER.get(crawler)
        if ledger is None:
            ledger = _BY_CRAWLER[crawler] = cls(crawler)
        return ledger

    @property
    def active(self) -> bool:
        return self.db is not None

    # -- the frontier opens and closes ------------------------------------------------

    def attach(self, db: FrontierDB) -> None:
        """Cut each feed file the last run wrote to what is committed, and close its document."""
        self.db = db
        if db.moved_from is not None and db.feeds():
            # (copied, the JOBDIR's recorded feed files are another crawl's, which goes on there: cut, it lost
            # its items; moved, they are not at their paths any more: a file of this crawl is found by inode
            # when it is opened again, ``open``)
            logger.warning("frontier: this JOBDIR was at %s; the feed files its runs wrote at their recorded "
                           "paths are left as they are", db.moved_from)
            return
        for row in db.feeds():
            if row.open:
                self._close_document(row)
                db.feed_closed(row.path)
        db.commit()

    def detach(self) -> None:
        """The frontier closed (the feed exporter closes the files after it)."""
        self.db = None
        self.detached = True
        self._files.clear()

    @staticmethod
    def _close_document(row: FeedRow) -> None:
        path = Path(row.path)
        try:
            st = path.stat()
        except FileNotFoundError:
            return
        if st.st_ino != row.inode or st.st_size < row.committed:
            logger.warning("feed %s is not the file this crawl wrote (replaced or shortened since); left as it is",
                           path)
            return
        tail = (row.header if row.committed == row.doc_start else b"") + row.closer
        with open(path, "r+b") as fh:
            if st.st_size == row.committed + len(tail):
                fh.seek(row.committed)
                if fh.read() == tail:  # closed after its last item was acknowledged: nothing to do
                    return
            fh.truncate(row.committed)
            fh.seek(row.committed)
            fh.write(tail)
        logger.info("feed %s: cut %d bytes after the last item whose request was acknowledged (its items "
                    "are written again on resume); the document is closed", path, st.st_size - row.committed)

    def _moved_here(self, path: str, inode: int, shape: Shape) -> FeedRow | None:
        """The frontier's row of the feed file now at ``path``, recorded at another path (the JOBDIR and its
        feeds moved: the same file, by inode), re-keyed to ``path``; None if there is none. O(feeds)."""
        db = self.db
        assert db is not None
        if db.moved_from is None:
            return None
        for row in db.feeds():
            if row.inode == inode and row.kind == shape.kind and row.path != path and not os.path.exists(row.path):
                db.feed_drop(row.path)
                moved = row._replace(path=path)
                logger.info("feed %s: the file this crawl wrote at %s, moved", path, row.path)
                return moved
        return None

    # -- Scrapy opens a feed file --------------------------------------------------

    def open(self, path: str, write_mode: str, shape: Shape) -> FeedFile:
        """Open the feed file at ``path`` (``"ab"``: append, ``"wb"``: overwrite)
        as ``DurableFeedStorage`` asks: cut to what is committed, going on with
        the document there if there is one."""
        db = self.db
        assert db is not None
        key = os.path.abspath(path)
        Path(key).parent.mkdir(parents=True, exist_ok=True)
        row = db.feed(key)
        fh = open(key, write_mode)  # noqa: SIM115  (closed by Scrapy through FeedFile.close)
        st = os.fstat(fh.fileno())
        if row is None and (moved := self._moved_here(key, st.st_ino, shape)) is not None:
            row = moved
        doc_start = committed = st.st_size
        going_on = False
        if write_mode == "wb" and row is not None and row.committed > row.doc_start:
            # (Scrapy's -O, as asked; but the pages of those items are acknowledged: no run fetches them again)
            logger.warning("feed %s is overwritten (-O, FEEDS overwrite) on a crawl resumed from JOBDIR: the "
                           "items earlier runs of this crawl wrote there (%d bytes) are gone, and their pages are "
                           "not fetched again. Use -o to append to the file", key, row.committed - row.doc_start)
        if write_mode != "wb" and row is not None and row.kind == shape.kind:
            if row.inode == st.st_ino and st.st_size >= row.committed:
                if st.st_size > row.committed:
                    fh.truncate(row.committed)
                doc_start, committed = row.doc_start, row.committed
                going_on = committed > doc_start  # (the opening is committed with the first item)
            else:
                logger.warning("feed %s is not the file this crawl wrote (replaced or shortened since): "
                               "its items are appended as a new document", key)
        elif write_mode != "wb" and row is None and db.moved_from is not None and st.st_size \
                and not _is_empty_document(key, st.st_size, shape):
            logger.warning("feed %s is not a file this crawl wrote (its JOBDIR was at %s: copied, not moved, "
                           "with its feeds?): its items are appended as a new document", key, db.moved_from)
        elif write_mode != "wb" and row is None and _is_empty_document(key, st.st_size, shape):
            # An empty document no run recorded: what FEED_STORE_EMPTY wrote as a run closed having
            # exported nothing, or after its first item could not be recorded (a full disk). Appended
            # to, the file would hold two documents (for JSON or XML, no longer one that parses).
            fh.truncate(0)
            doc_start = committed = 0
            logger.info("feed %s: the empty document there (a run that exported nothing) is replaced by this "
                        "crawl's", key)
        csv_header = row.csv_header if going_on and row is not None else None
        try:
            db.feed_put(FeedRow(key, shape.kind, doc_start, committed, st.st_ino, shape.header, shape.closer,
                                csv_header, 1))
            db.commit()  # the file is recorded before anything is written to it
        except BaseException:
            fh.close()
            raise
        file = FeedFile(fh, key, committed, drop=shape.header if going_on else b"",
                        separator=shape.separator if going_on else b"",
                        skip_row=csv_header if going_on and shape.csv_header else None,
                        capture_row=shape.csv_header and not going_on)
        self._files[key] = _Open(file, committed, committed, csv_header_saved=csv_header is not None)
        if going_on:
            logger.info("feed %s: going on with its document after %d committed bytes", key, committed)
        return file

    # -- items and commits ---------------------------------------------------------

    def _item_scraped(self, response: Any = None) -> None:
        # (connected after the feed exporter's handler: the item is in the files already)
        if not self._files:
            return
        rid = response_id(response)
        for f in self._files.values():
            if f.file.pos > f.noted:
                f.pending.append((f.file.pos, rid))
                f.noted = f.file.pos

    def settle(self, candidates: list[int]) -> tuple[list[int], set[int]]:
        """Of the requests ready to be acknowledged, those whose feed items the
        files' committed offsets can cover now (in order), and those that must
        wait (their items follow items of a request not acknowledged yet). The
        files are flushed and their new offsets written in the open transaction.
        O(items pending x rounds); rounds are few."""
        if not self._files:
            return candidates, set()
        if not self.failed and (broken := next((f for f in self._files.values() if f.file.failed), None)):
            self.failed = True
            stop_for_feed(self.crawler, broken.file.path, OSError("an item could not be written"))
        if self.failed:
            return [], set(candidates)
        ok = set(candidates)
        while True:  # the largest set whose items all lie in the files' committable prefixes
            held: set[int] = set()
            for f in self._files.values():
                blocked = False
                for _, rid in f.pending:
                    if rid is None:
                        continue
                    if rid not in ok:
                        blocked = True
                    elif blocked:
                        held.add(rid)
            if not held:
                break
            ok -= held
        db = self.db
        assert db is not None
        moves = []
        for f in self._files.values():
            end, n = f.committed, 0
            while n < len(f.pending) and (f.pending[n][1] is None or f.pending[n][1] in ok):
                end, n = f.pending[n][0], n + 1
            header = f.file.csv_header if not f.csv_header_saved and end > f.committed else None
            if end > f.committed or header is not None:
                moves.append((f, end, n, header))
        # every file flushed (in the page cache) before any offset is committed: a file that
        # cannot be written commits nothing, for no file may cover items of requests not acknowledged
        for f, *_ in moves:
            try:
                f.file.flush()
            except OSError as exc:
                self.failed = True
                stop_for_feed(self.crawler, f.file.path, exc)
                return [], set(candidates)
        for f, end, n, header in moves:
            for _ in range(n):
                f.pending.popleft()
            db.feed_committed(f.file.path, end, header)
            f.committed = end
            f.csv_header_saved = f.csv_header_saved or header is not None
        return [r for r in candidates if r in ok], set(candidates) - ok


#: the arguments of ``csv.writer`` a CSV exporter takes from ``item_export_kwargs``
_CSV_FORMAT = ("delimiter", "quotechar", "escapechar", "doublequote", "skipinitialspace", "lineterminator",
               "quoting", "strict", "dialect")


def csv_fields(header: bytes, feed_options: dict[str, Any]) -> list[str] | None:
    """The columns of a CSV header row a feed's exporter wrote (its fields, in order), or None if it does
    not read as one row.

    >>> csv_fields(b"url,title\\r\\n", {"encoding": "utf-8"})
    ['url', 'title']
    """
    kwargs = {k: v for k, v in (feed_options.get("item_export_kwargs") or {}).items() if k in _CSV_FORMAT}
    try:
        rows = list(csv.reader(io.StringIO(header.decode(feed_options.get("encoding") or "utf-8")), **kwargs))
    except (UnicodeDecodeError, csv.Error, TypeError):
        return None
    return rows[0] if len(rows) == 1 and rows[0] else None


class DurableFeedStorage(FileFeedStorage):
    """Scrapy's local file storage, written exactly once across kills when the
    durable frontier runs (see the module docstring); otherwise Scrapy's own."""

    def __init__(self, uri: str, *, feed_options: dict[str, Any] | None = None, crawler: Crawler | None = None):
        super().__init__(uri, feed_options=feed_options)
        self.crawler = crawler
        self.feed_options = feed_options or {}

    @classmethod
    def from_crawler(cls, crawler: Crawler, uri: str, *, feed_options: dict[str, Any] | None = None
                     ) -> DurableFeedStorage:
        return cls(uri, feed_options=feed_options, crawler=crawler)

    def open(self, spider: Spider) -> IO[bytes]:
        if self.crawler is not None:
            ledger = FeedLedger.of(self.crawler)
            if (ledger.active or ledger.detached) and (shape := shape_of(self.crawler, self.feed_options)):
                if ledger.active:
                    file = ledger.open(self.path, self.write_mode, shape)
                    if file.earlier_csv_header is not None and self.feed_options.get("fields") is None:
                        # (the same dict Scrapy then builds the exporter with: it writes the columns the
                        # document has, as one uninterrupted run's exporter would have, from its first item)
                        self.feed_options["fields"] = csv_fields(file.earlier_csv_header, self.feed_options)
                    return cast(IO[bytes], file)
                if self.write_mode == "ab" and os.path.exists(self.path) and os.path.getsize(self.path):
                    # FEED_STORE_EMPTY at the close of a run that exported nothing (the frontier is
                    # closed): the file's document, closed when the frontier opened, stays one document
                    return open(os.devnull, "wb")  # noqa: SIM115  (closed by Scrapy)
        return super().open(spider)


class FlushGate:
    """Flushes every feed exporter's file before a request is acknowledged, so
    a kill loses no item a feed was handed (the at-least-once feeds: their last
    items may be written again after a resume). Reads FeedExporter's slots; if
    a future Scrapy hides them, those feeds lose that guarantee (logged once)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._warned = False
        self._failed = False

    def mark(self) -> int:
        return 0

    def settled(self, token: int) -> bool:
        if self._failed:
            return False
        try:
            from scrapy.extensions.feedexport import FeedExporter

            slots = [slot for ext in self.crawler.extensions.middlewares if isinstance(ext, FeedExporter)
                     for slot in ext.slots]
        except Exception as exc:  # (a Scrapy that hides the slots: never stop the crawl over it)
            self._warn(exc)
            return True
        for slot in slots:
            fh = getattr(slot, "file", None)
            if fh is not None and not getattr(fh, "closed", False):
                try:
                    fh.flush()
                except OSError as exc:  # (a full disk: the items it holds are not written)
                    self._failed = True
                    stop_for_feed(self.crawler, getattr(slot, "uri", "a feed file"), exc)
                    return False
                except Exception as exc:  # (a file closed meanwhile by its storage, say: not worth a stop)
                    self._warn(exc)
        return True

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            logger.warning("frontier: could not flush the feed files before acknowledging (%r); "
                           "a kill may lose the last items of a feed", exc)
            self._warned = True


def stop_for_feed(crawler: Crawler, feed: str, exc: OSError) -> None:
    """A feed file cannot be written (a full disk): stop the crawl, as a store that
    cannot be written does. Its gate stays shut, so no request whose items it may have
    lost is acknowledged: the resume cuts the file to what was committed and fetches
    them again."""
    stop_for_failed_write(crawler, "frontier", f"the feed {feed}", exc, "feed_error")


_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, FeedLedger] = weakref.WeakKeyDictionary()
