"""The filter's side of the learned URL rules (``crawler.url_rules``).

The rule book learns from each verdict which URLs serve the content of
pages already fetched (``learn``); the filter, and ``AvoidMiddleware``
before each download, ask it which requests need not be made (``avoided``:
each explained once in the duplicates file). A rule a counter-example
retires gives back the requests it avoided, and they are made after all
(``requeue``). A rule book that cannot be read or written (a shared one's
Redis down) costs nothing but the learning: requests are made and nothing
is learned until it is back (``neardup/url_rules/unavailable``, a warning a
minute).
"""

from __future__ import annotations

import logging
import time
from urllib.parse import urldefrag

from scrapy import Request
from scrapy.crawler import Crawler

from ..config import NearDupConfig
from ..counts import REQUESTS_AVOIDED
from ..frontier.codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from ..url_rules import RuleBook
from .duplicates_log import DuplicatesLog
from .store_faults import FILE_ERRORS

logger = logging.getLogger(__name__)

#: Seconds between two warnings that the rule book is unavailable
WARN_EVERY = 60.0


class LearnedRules:
    """The crawl's rule book, fed with verdicts and asked about requests."""

    def __init__(self, crawler: Crawler, config: NearDupConfig, duplicates: DuplicatesLog) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.skip_meta_key = config.skip_meta_key
        self.duplicates = duplicates
        self.book = RuleBook(config.url_rules_file, max_distance=config.max_distance,
                             min_evidence=config.url_rules_min_evidence, explore=config.url_rules_explore,
                             pin=config.url_rules_pin, forbid=config.url_rules_forbid)
        self._warned = 0.0

    def learn(self, url: str, fp: int, duplicate_of: str | None = None) -> None:
        """Tell the rule book what this page is (and what it duplicates)."""
        try:
            self.book.observe(url, fp, duplicate_of)
            for event, st in self.book.events:
                self.stats.inc_value(f"neardup/url_rules/{event}")
                if event == "retired":
                    self._requeue(self.book.release(st), st.rule.spec)
            self.book.events.clear()
        except FILE_ERRORS as exc:
            self._unavailable(exc)

    def avoided(self, requests: list[Request], referer: str | None) -> set[Request]:
        """Those of ``requests`` not to be made: a learned rule says a fetched
        page has their content (that page's outlinks stand for theirs).
        Explained in the duplicates file, once per URL. One look-up round for
        all (a shared rule book is a Redis round trip)."""
        todo = [r for r in requests if not r.dont_filter and not r.meta.get(self.skip_meta_key)]
        if not todo:
            return set()
        # (urldefrag parses the whole URL: only for the few outlinks that have a #fragment)
        urls = [urldefrag(r.url)[0] if "#" in r.url else r.url for r in todo]
        try:
            verdicts = self.book.avoid_many(urls)
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            return set()
        out = set()
        for request, url, verdict in zip(todo, urls, verdicts):
            if verdict is None:
                continue
            spec, target, explored = verdict
            if explored:
                self.stats.inc_value("neardup/url_rules/explored")
                continue
            try:
                data: str | None = encode_request(request, self.crawler.spider)
            except UnserializableRequest:
                data = None  # (it cannot be requeued should the rule be retired; the URL is in the duplicates file)
            try:
                first = self.book.record_avoided(url, spec, target, data)
            except FILE_ERRORS as exc:
                self._unavailable(exc)
                continue
            out.add(request)
            if first:
                self.stats.inc_value(REQUESTS_AVOIDED)
                self.duplicates.avoided(url, target, spec, referer)
        return out

    def close(self) -> None:
        self.book.close()

    def _requeue(self, requests: list[str | None], spec: str) -> None:
        """Make the requests a retired rule avoided, after all."""
        engine = self.crawler.engine
        made = 0
        for data in requests:
            if data is None or engine is None:
                continue
            try:
                request = decode_request(data, self.crawler.spider)
            except CorruptRequest as exc:
                logger.warning("could not requeue a request rule %s avoided: %s", spec, exc)
                continue
            engine.crawl(request.replace(dont_filter=True))  # (the dupe filter saw some of them already)
            made += 1
        self.stats.inc_value("neardup/url_rules/requeued", made)
        lost = len(requests) - made
        logger.info("URL rule %s retired: %d request(s) it avoided are made after all%s", spec, made,
                    f" ({lost} could not be)" if lost else "")

    def _unavailable(self, exc: BaseException) -> None:
        """The rule book cannot be read or written: nothing is learned or
        avoided meanwhile; the crawl goes on."""
        self.stats.inc_value("neardup/url_rules/unavailable")
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            logger.warning("URL rules unavailable (%s: %s): requests are made and nothing is learned until "
                           "they are back", type(exc).__name__, exc)
