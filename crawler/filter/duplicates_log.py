"""Every drop explained: a JSON line in the duplicates file and a DEBUG log line.

Three kinds of line: a page dropped as a near-duplicate (``id`` and ``url``,
both the page's URL, ``duplicate_of``, ``distance``, both fingerprints,
``referer``, ``time``, ``canonical``: the URL the dropped page declares
canonical, or null), a request a learned URL rule left out (``avoided:
true``, ``rule``), and one such request made after all because its rule was
retired (``requeued: true``, ``rule``; it withdraws the URL's ``avoided``
line). ``neardup dedup`` writes the same schema (docs/stats.md, "The
duplicates file"); lines written before ``id`` was added read the same.

A drop is recorded once: a URL already in the file as a near-duplicate of
the same page (dropped by an earlier run on the same store, or before a
kill) is not written again (``recorded``; the filter counts it as
``neardup/dropped_again``). The file's drops are read when it is opened,
kept as 64-bit hashes of the pair (8 bytes each, sorted); a line a kill cut
short is removed first (its request was not acknowledged, so it is fetched
and its drop written again).
The file is written in blocks: flushed at least every second, before a
request whose drop it holds is acknowledged (it is a gate of the durable
frontier, ``crawler.frontier.acks``) and at the end; a flush per drop would
be a syscall per page on a mirror. A write that fails (a full disk) stops the
crawl, as a store that cannot be written does, and shuts the gate.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import IO, Any

import numpy as np
from scrapy.crawler import Crawler

from scrapy_neardup.dedup.simhash import to_hex
from scrapy_neardup.dedup.store.backends import private_file

from ..clock import utc_now
from ..frontier.acks import AckTracker
from ..frontier.stop import stop_for_failed_write

logger = logging.getLogger(__name__)

#: Seconds a written line may wait in the buffer
FLUSH_EVERY = 1.0


def _pair_key(url: str, duplicate_of: str) -> int:
    """A 64-bit hash of a drop (collisions: about 1 in 10**7 at a million drops)."""
    return int.from_bytes(hashlib.blake2b(f"{url}\n{duplicate_of}".encode(), digest_size=8).digest(), "little")


def _read_drops(path: Path) -> np.ndarray:
    """The sorted keys of the drops the file at ``path`` holds, after cutting off
    a last line a kill left unfinished. O(file size)."""
    keys: list[int] = []
    with open(path, "rb+") as fh:
        good = 0  # offset after the last complete line
        for line in fh:
            if not line.endswith(b"\n"):
                break
            good += len(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue  # (a line damaged otherwise: not a drop this reads)
            if isinstance(record, dict) and not record.get("avoided") and "duplicate_of" in record:
                keys.append(_pair_key(str(record.get("url")), str(record["duplicate_of"])))
        if good < os.fstat(fh.fileno()).st_size:
            logger.info("duplicates file %s: removed a last line a stop left unfinished", path)
            fh.truncate(good)
    return np.unique(np.array(keys, dtype=np.uint64))


class DuplicatesLog:
    """The duplicates file (``path``; None: log lines only)."""

    def __init__(self, crawler: Crawler, path: str | None) -> None:
        self._fh: IO[str] | None = None
        self._flushed = time.monotonic()
        self._written = self._synced = 0
        self._known = np.zeros(0, dtype=np.uint64)  # the drops the file held when opened
        self._new: set[int] = set()  # and those written since
        self._crawler, self._path = crawler, path
        self._failed = False  # (a write failed: nothing is acknowledged any more, and the crawl stops)
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            private_file(path)
            self._known = _read_drops(Path(path))
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
            AckTracker.of(crawler).add_gate(self)  # a drop is acknowledged only once its line is written

    def recorded(self, url: str, duplicate_of: str) -> bool:
        """Whether the file already holds the drop of ``url`` as a near-duplicate of
        ``duplicate_of`` (always False without a file). O(log n)."""
        if self._fh is None:
            return False
        key = _pair_key(url, duplicate_of)
        i = int(np.searchsorted(self._known, np.uint64(key)))
        return (i < len(self._known) and int(self._known[i]) == key) or key in self._new

    def dropped(self, url: str, duplicate_of: str, distance: int, fingerprint: int, duplicate_of_fingerprint: int,
                referer: str | None, canonical: str | None = None) -> None:
        """``url`` was dropped as a near-duplicate of ``duplicate_of`` (not
        ``recorded`` yet: the caller asks first); ``canonical``: the URL it declares canonical."""
        if self._fh is not None:
            self._new.add(_pair_key(url, duplicate_of))
        self._write({
            "id": url,
            "url": url,
            "duplicate_of": duplicate_of,
            "distance": distance,
            "fingerprint": to_hex(fingerprint),
            "duplicate_of_fingerprint": to_hex(duplicate_of_fingerprint),
            "referer": referer,
            "time": utc_now(),
            "canonical": canonical,
        })
        logger.debug("near-duplicate dropped: %s duplicates %s (distance %d)", url, duplicate_of, distance)

    def avoided(self, url: str, duplicate_of: str, rule: str, referer: str | None, confirmed: bool = False,
                matched: str | None = None) -> None:
        """``url`` is not requested: URL rule ``rule`` says ``duplicate_of`` has its content. ``confirmed``: it
        was requested, as a ranged GET whose bytes confirmed it, and its body never downloaded; ``matched``:
        the fetched page whose bytes it matched, where that is not ``duplicate_of`` (a page dropped as a
        near-duplicate of the kept one named)."""
        record = {"id": url, "url": url, "duplicate_of": duplicate_of, "avoided": True, "rule": rule,
                  "referer": referer, "time": utc_now()}
        if confirmed:
            record["confirmed"] = True
        if matched is not None and matched != duplicate_of:
            record["matched"] = matched
        self._write(record)
        logger.debug("not requested: %s (rule %s: %s has its content)", url, rule, duplicate_of)

    def requeued(self, url: str, rule: str, retired: bool = True) -> None:
        """``url``, avoided by ``rule``, is requested after all (the rule was
        retired, or a request for it was on its way already): this line
        withdraws its ``"avoided": true`` line."""
        self._write({"id": url, "url": url, "requeued": True, "rule": rule, "time": utc_now()})
        logger.debug("requested after all: %s (rule %s %s)", url, rule,
                     "retired" if retired else "avoided it while a request for it was on its way")

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError as exc:  # (what it still held: those requests were not acknowledged)
                self._fail(exc)

    # the duplicates file as a gate of the durable frontier (crawler.frontier.acks)
    def mark(self) -> int:
        return self._written

    def settled(self, token: int) -> bool:
        if self._synced < token:
            self._flush()
        return self._synced >= token and not self._failed

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh and not self._failed:
            try:
                self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            except OSError as exc:
                self._fail(exc)
                return
            self._written += 1
            if time.monotonic() - self._flushed >= FLUSH_EVERY:
                self._flush()

    def _flush(self) -> None:
        if self._fh and not self._failed and self._synced < self._written:
            try:
                self._fh.flush()
            except OSError as exc:
                self._fail(exc)
                return
            self._synced = self._written
        self._flushed = time.monotonic()

    def _fail(self, exc: OSError) -> None:
        """The file cannot be written (a full or read-only disk): stop the crawl, as a
        store that cannot be written does. From now on no request is acknowledged (the
        frontier's gate stays shut), so every drop not yet on disk is decided and
        written again after a resume; nothing raises into the caller (the frontier's
        commit, a verdict), where the error would repeat at every step."""
        self._failed = True
        stop_for_failed_write(self._crawler, "near-duplicate filter", f"the duplicates file {self._path}", exc,
                              "duplicates_file_error")
