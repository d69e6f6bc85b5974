"""The near-duplicate filter: a spider middleware.

Spider middlewares see responses after the downloader middlewares, so after
``HttpCompressionMiddleware`` has decompressed them. For each response:

1. ``process_spider_input`` (before the callback) extracts the visible text,
   fingerprints it and asks the store; first seen wins;
2. ``process_spider_output_async`` lets a kept page's output through and
   discards *everything* a near-duplicate's callback yields: no items, and
   none of its outlinks are requested because of it. A page that a kept page
   also links to is still crawled, once, via that page.

Every drop is explained: a JSON line in the duplicates file and a DEBUG log
line. The fingerprint, title and text are left in ``response.meta["neardup"]``
for the spider, so nothing is extracted twice.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response, TextResponse

from dedup.fingerprint import Fingerprinter
from dedup.simhash import to_hex
from dedup.store import SimhashStore

from .config import NearDupConfig

logger = logging.getLogger(__name__)

KEPT, DROPPED, UNCHANGED, SKIPPED = "kept", "dropped", "unchanged", "skipped"
HTML_TYPES = (b"text/html", b"application/xhtml+xml")


class NearDupMiddleware:
    """Drops near-duplicate pages and their outlinks. See the module docstring."""

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.fingerprinter = Fingerprinter(min_tokens=config.min_text)
        self.store = SimhashStore.open(config.store, max_distance=config.max_distance,
                                       capacity=config.capacity, scheme=self.fingerprinter.scheme)
        self._verdicts: weakref.WeakKeyDictionary[Response, str] = weakref.WeakKeyDictionary()
        self._dup_fh = None
        if config.duplicates_file:
            Path(config.duplicates_file).parent.mkdir(parents=True, exist_ok=True)
            self._dup_fh = open(config.duplicates_file, "a", encoding="utf-8")  # noqa: SIM115
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        logger.info("near-duplicate filter on: k=%d, store %s (%d fingerprints), %s",
                    config.max_distance, config.store or "in memory", len(self.store),
                    self.store.layout.describe())

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupMiddleware:
        config = NearDupConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("NEARDUP_ENABLED is off")
        crawler.neardup_config = config  # type: ignore[attr-defined]
        return cls(crawler, config)

    # -- the check --------------------------------------------------------------

    def process_spider_input(self, response: Response) -> None:
        self._verdicts[response] = self._check(response)

    def _skip(self, reason: str) -> str:
        self.stats.inc_value(f"neardup/skipped/{reason}")
        return SKIPPED

    def _check(self, response: Response) -> str:
        if response.meta.get(self.config.skip_meta_key):
            return self._skip("meta")
        if not isinstance(response, TextResponse) or not self._is_html(response):
            return self._skip("non_html")
        encoding = response.encoding if isinstance(response, TextResponse) else None
        result = self.fingerprinter.fingerprint_html(response.body, encoding)
        if not result.ok:
            reason = (result.reason or "unparsable").split(":")[0]
            if self.config.debug:
                logger.debug("not fingerprinted (%s): %s", result.reason, response.url)
            return self._skip(reason)
        fp = result.value
        assert fp is not None
        response.meta["neardup"] = {"fingerprint": to_hex(fp), "title": result.title, "text": result.text}
        self.stats.inc_value("neardup/checked")
        url = urldefrag(response.url)[0]  # a #fragment names the same document
        # The same URL again with near-identical text (a later run, a re-fetch) is unchanged.
        for match in self.store.query(fp):
            if match.key == url:
                self.stats.inc_value("neardup/unchanged")
                if self.config.debug:
                    logger.debug("unchanged (distance %d): %s", match.distance, url)
                return UNCHANGED
        match = self.store.check_and_add(fp, url)
        if match is None:
            self.stats.inc_value("neardup/kept")
            return KEPT
        self.stats.inc_value("neardup/dropped")
        self.stats.inc_value(f"neardup/distance_count/{match.distance}")
        referer = response.request.headers.get("Referer") if response.request else None
        record = {
            "url": url,
            "duplicate_of": match.key,
            "distance": match.distance,
            "fingerprint": to_hex(fp),
            "duplicate_of_fingerprint": to_hex(match.fingerprint),
            "referer": referer.decode("latin-1") if referer else None,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        if self._dup_fh:
            self._dup_fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._dup_fh.flush()
        logger.debug("near-duplicate dropped: %s duplicates %s (distance %d)", url, match.key, match.distance)
        return DROPPED

    @staticmethod
    def _is_html(response: TextResponse) -> bool:
        ctype = response.headers.get("Content-Type", b"").lower()
        if ctype:
            return any(t in ctype for t in HTML_TYPES)
        head = response.body[:512].lstrip().lower()
        return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head

    # -- the output -------------------------------------------------------------

    def _verdict(self, response: Response) -> str:
        return self._verdicts.get(response, SKIPPED)

    def _filter(self, response: Response, item: Any) -> bool:
        verdict = self._verdict(response)
        if verdict == DROPPED:
            if isinstance(item, Request):
                self.stats.inc_value("neardup/outlinks_dropped")
            return False
        if verdict == UNCHANGED and not self.config.emit_unchanged and not isinstance(item, Request):
            return False
        return True

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in result:
            if self._filter(response, item):
                yield item

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        for item in result:
            if self._filter(response, item):
                yield item

    def spider_closed(self, reason: str) -> None:
        self.store.close()
        if self._dup_fh:
            self._dup_fh.close()
            self._dup_fh = None
        if self.config.store:
            size = sum(f.stat().st_size for f in Path(self.config.store).glob("*") if f.is_file())
            self.stats.set_value("neardup/store_bytes", size)

