"""The filter's side of the learned URL rules (``crawler.url_rules``).

The rule book learns from each verdict which URLs serve the content of
pages already fetched (``learn``); the filter, and ``AvoidMiddleware``
before each download, ask it which requests need not be made (``avoided``:
each explained once in the duplicates file). A rule a counter-example
retires gives back the requests it avoided, and they are made after all
(``_requeue``):

* through the dupe filter like any other request, so that a URL also reached
  by an ordinary link meanwhile is fetched once; only a request the dupe
  filter had already let through (left out just before its download) is made
  with ``dont_filter``, once, as the filter would refuse it;
* with the ``Referer`` of the page that linked to it;
* with ``JOBDIR`` (the durable frontier), the avoided requests stay in the
  rule book until the frontier has committed them, each queued under a mark
  in the same frontier transaction (``FrontierDB.mark_once``): a kill between
  the retirement and the queueing loses none, and a resume that queues them
  again (``unreleased``, at ``spider_opened``) queues none twice. A request
  left out just before its download whose frontier row is not acknowledged
  yet (or was redelivered by a kill) is acknowledged in that same
  transaction (``_supersede``): the copy replaces it, never both;
* with the shared frontier (scrapy-redis), likewise: claimed from a rule book
  on the frontier's Redis server and queued in one server-side step
  (``push_claimed``), or else (a Redis Cluster, where the book's keys and the
  queue's are in other slots; a book elsewhere) each queued under a mark in the
  queue's slot (``push_marked``) and then let go by the book, so a resume that
  queues them again queues none twice.

``neardup/requests_avoided`` counts the URLs left out and never downloaded:
a requeued URL is taken off it again (``neardup/url_rules/requeued``), and
the duplicates file gets a ``"requeued": true`` line for it, which withdraws
its ``"avoided": true`` line. The avoided requests noted in the rule book
are committed before the request that avoided them is acknowledged (a gate
of the durable frontier, ``frontier.acks``). A rule book that cannot be read or written (a shared one's
Redis down) costs nothing but the learning: requests are made and nothing
is learned until it is back (``neardup/url_rules/unavailable``, a warning a
minute).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urldefrag, urlsplit

import mmh3
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from scrapy_neardup.dedup.fingerprint.window import SLICES, head_digest, head_parts, head_ranges, page_head, slice_size
from scrapy_neardup.dedup.fingerprint.window import digest as _digest

from ..config import NearDupConfig
from ..counts import COPIES_CONFIRMED, REQUESTS_AVOIDED
from ..frontier.acks import ID_KEY, EMIT_AGAIN_KEY, AckTracker
from ..frontier.codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from ..frontier.scheduler import DurableScheduler
from ..url_rules import RuleBook
from ..url_rules.book import RuleState
from ..url_rules.etags import change_of
from ..url_rules.storage import Avoided, SqliteStorage
from .byte_ranges import answered_parts, content_range, windows_in
from .duplicates_log import DuplicatesLog
from .store_faults import FILE_ERRORS
from .verdicts_due import VerdictsDue

if TYPE_CHECKING:  # (the shared frontier needs scrapy-redis, the [redis] extra)
    from ..frontier.redis_scheduler import ReliableRedisScheduler

logger = logging.getLogger(__name__)

#: Ranged GETs on a host that confirmed nothing, and their share of those answered there, past which the host's
#: predicted copies are plain GETs (``LearnedRules._ranges_pay``)
MIN_RANGE_MISSES = 3
MAX_RANGE_MISS_SHARE = 0.2
RANGE_RETRY_EVERY = 50
#: Seconds between two warnings that the rule book is unavailable
WARN_EVERY = 60.0
#: request.meta key of a ranged GET confirming a predicted copy: (rule, target URL, its length, the windows asked
#: for as (start, end) pairs, the hash of their bytes end to end, the target's fingerprint)
CONFIRM_KEY = "neardup_confirm"
#: The headers of each part of a ``multipart/byteranges`` answer, about (nginx: 92 bytes for a page of 4 digits):
#: a page is confirmed by its text's windows in one multi-range GET (``window.slice_windows``) when their answer
#: is at most half of what the page is sent in (3.7 kB for 16 windows with the default 256 bytes, 1.9 kB for 8),
#: a shorter one by its one window
PART_HEADERS = 100
#: request.meta key set as a response arrives with a ``Content-Encoding`` (``LearnedRules._arrived``): Scrapy
#: drops that header as it decodes the body, and the response's ``ETag`` is the compressed body's
ENCODED_KEY = "neardup_encoded"
#: request.meta key the filter sets on a checked page's outlinks, taken off as they reach ``AvoidMiddleware``: only
#: such a request waits there for the verdicts above it (``verdicts_due``). A callback that awaits a download of
#: its own (``engine.download_async``) would wait for its own page's verdict, which waits for the callback.
#: (Set through Scrapy's ``request_scheduled`` signal, it cost the crawl's thread 0.7 ms a page: a page's
#: every outlink, the dupe filter's refused ones too, went through the signal's dispatch)
QUEUED_KEY = "neardup_queued"
#: The heads' format, in the seed of their keys: 2 since the window's place is kept, 3 since the slices' windows are
HEADS_FORMAT = 3


def _decoded(response: Response) -> bool:
    """Whether ``response``'s body was sent compressed: its request is marked so (``ENCODED_KEY``, as it
    arrived, ``LearnedRules._arrived``), or its ``Content-Length`` is not the body's length, which Scrapy
    decoded. O(1)."""
    if response.request is not None and response.request.meta.get(ENCODED_KEY):
        return True
    sent = response.headers.get(b"Content-Length")
    return sent is not None and sent.isdigit() and int(sent) != len(response.body)


def _strong_etag(response: Response) -> str | None:
    """The identity's strong ``ETag`` for ``response``, the one ``If-Range`` may name: its own, if its body came
    as the identity; a compressed body's weak one (``W/"..."``) as the strong one it weakens (nginx's ``gzip``
    makes it so; a wrong guess costs a copy answered whole, a plain crawl's request); else None (a weak ``ETag``
    of the identity, or a compressed body's strong one, ``gzip_static``'s, which the identity never has). O(1)."""
    raw = response.headers.get(b"ETag")
    if not raw:
        return None
    compressed = _decoded(response)
    if raw.startswith(b'"') and not compressed:
        return raw.decode("latin-1")
    return raw[2:].decode("latin-1") if raw.startswith(b'W/"') and compressed else None


def _sent_length(response: Response) -> int | None:
    """The bytes a compressed ``response``'s body was sent in: as it arrived (``ENCODED_KEY``, ``_arrived``), or
    its ``Content-Length``; None if neither is known. O(1)."""
    arrived = response.request.meta.get(ENCODED_KEY) if response.request is not None else None
    if isinstance(arrived, int) and not isinstance(arrived, bool):
        return arrived
    length = response.headers.get(b"Content-Length")
    return int(length) if length is not None and length.isdigit() else None


def _asked(meta: tuple[Any, ...], size: int) -> tuple[str, str, int, list[tuple[int, int]], int, int | None]:
    """A ``CONFIRM_KEY`` value as (rule, target, length, windows, digest, target's fingerprint): one queued by an
    earlier version has one window's offset in place of the windows, and may lack the fingerprint. O(windows)."""
    spec, target, length, windows, digest, *target_fp = meta
    ranges = [(windows, windows + size)] if isinstance(windows, int) else [tuple(w) for w in windows]
    return spec, target, length, ranges, digest, target_fp[0] if target_fp else None


def _as_plain_get(request: Request) -> Request:
    """A ranged GET of ``_to_confirm`` made again as the plain GET it stood for (``dont_filter``: the dupe filter
    has seen it; compressed again, as a plain crawl's), without its confirmation's mark. O(1)."""
    plain = request.replace(dont_filter=True)
    for name in (b"Range", b"If-Range", b"Accept-Encoding"):
        plain.headers.pop(name, None)
    plain.meta.pop(CONFIRM_KEY, None)
    return plain


def _joined(body: bytes, ranges: list[tuple[int, int]]) -> bytes:
    """The bytes of ``ranges`` (start, end) of a whole ``body``, end to end."""
    return b"".join(body[start:end] for start, end in ranges)


def _defragged(url: str) -> str:
    """``url`` without its #fragment, as the rule book and the duplicates file name it.
    (``urldefrag`` parses the whole URL: only for the few URLs that have a fragment.)"""
    return urldefrag(url)[0] if "#" in url else url


class LearnedRules:
    """The crawl's rule book, fed with verdicts and asked about requests."""

    def __init__(self, crawler: Crawler, config: NearDupConfig, duplicates: DuplicatesLog) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.skip_meta_key = config.skip_meta_key
        self.duplicates = duplicates
        self.book = RuleBook(config.url_rules_file, max_distance=config.max_distance,
                             min_evidence=config.url_rules_min_evidence, explore=config.url_rules_explore,
                             pin=config.url_rules_pin, forbid=config.url_rules_forbid,
                             narrow=config.url_rules_confirm_bytes > 0, came_whole=self._came_whole,
                             same_bytes=self._same_bytes)
        self._warned = 0.0
        #: pages awaiting their verdict, which requests below them wait for on a host with rules
        self.due = VerdictsDue(lambda host: bool(self.book.by_host.get(host)), self.stats,
                               max_held=crawler.settings.getint("CONCURRENT_REQUESTS") // 2)
        self._avoided_here: dict[str, str] = {}  # URL -> rule: what this run counts in neardup/requests_avoided
        self._written = self._synced = 0  # avoided requests noted / committed (the gate)
        self.confirm_bytes = config.url_rules_confirm_bytes
        self._made_whole: set[str] = set()  # URLs whose ranged GET's bytes did not match: made whole after it
        #: per host, ranged GETs answered and those that confirmed nothing (``_ranges_pay``)
        self._ranged: Counter[str] = Counter()
        self._ranges_answered: Counter[str] = Counter()  # (ranged GETs a host answered with a range, 206)
        self._multi_answered: Counter[str] = Counter()  # (multi-range GETs a host answered with several parts)
        self._single_range: set[str] = set()  # (hosts that answered a multi-range GET whole or with one range)
        #: per host, the bytes its pages with a head were sent in (compressed or not) and their bodies' (``_to_confirm``)
        self._sent_bytes: Counter[str] = Counter()
        self._whole_bytes: Counter[str] = Counter()
        self._range_misses: Counter[str] = Counter()
        self._range_retries: Counter[str] = Counter()
        self._told_ranges: set[str] = set()
        #: (URL, fingerprint) of a fetched page -> the kept page its content is in: itself, or the page it was
        #: dropped against (``Verdicts.kept_twin``: set by the filter), for the avoided lines' ``duplicate_of``
        self.kept_twin: Callable[[str, int], str] = lambda url, fp: url
        #: ``Verdicts.twins`` (set by the filter): for requests a rule would leave out, None for one whose own
        #: page the store holds, else the kept page to name
        self.twins: Callable[[list[tuple[str, str, int | None]]], list[str | None]] = \
            lambda asked: [target for _, target, _ in asked]
        # (each fetched page's head, what a ranged GET is checked against, is kept in the rule book:
        # ``_keep_head``, committed through the gate with the book, so that a resumed crawl confirms too)
        AckTracker.of(crawler).add_gate(self)
        crawler.signals.connect(self._resume, signal=signals.spider_opened)
        crawler.signals.connect(self._downloaded, signal=signals.response_received)
        crawler.signals.connect(self._arrived, signal=signals.response_downloaded)

    def learn(self, url: str, fp: int, duplicate_of: str | None = None, response: Response | None = None,
              head: int | None = None) -> None:
        """Tell the rule book what this page is (and what it duplicates). With its ``response`` (a 200), its
        ``head`` is kept for the ranged GETs that confirm its copies (``_keep_head``; the worker made it, with
        the fingerprint: ``window.page_head``, here when it did not)."""
        if self.confirm_bytes and response is not None and response.status == 200:
            self._keep_head(url, response, head)
        spec = self._avoided_here.get(url)
        if spec is not None:  # (an outlink to it was left out while its response was on its way)
            self._withdraw(url, spec)
        try:
            self.book.observe(url, fp, duplicate_of)
            events = self.book.events[:]
            self.book.events.clear()  # (each event once, whatever fails below)
            for event, st in events:
                self.stats.inc_value(f"neardup/url_rules/{event}")
                if event == "retired":
                    self._requeue(st)
        except FILE_ERRORS as exc:
            self._unavailable(exc)

    @property
    def shared(self) -> bool:
        """Whether the rule book is a shared one (on Redis: a look-up is a round trip)."""
        return not isinstance(self.book.store, SqliteStorage)

    def acting(self) -> bool:
        """Whether any rule acts (``RuleBook.acts``): with none, no request is avoided. O(1)."""
        return self.book.acts()

    def avoided(self, requests: list[Request], referer: str | None, scheduled: bool = False) -> set[Request]:
        """Those of ``requests`` not to be made: a learned rule says a fetched
        page has their content (that page's outlinks stand for theirs).
        Explained in the duplicates file, once per URL. One look-up round for
        all (a shared rule book is a Redis round trip). ``scheduled``: they have
        passed the dupe filter (``AvoidMiddleware``). A sub-tree rule's prediction, or a parameter
        rule's on a value seen (``RuleBook.confirmed_only``), is never left out unconfirmed: its outlink is
        queued, and made a ranged GET just before its download (``_to_confirm``)."""
        if not self.book.acts():  # (no rule acts anywhere: nothing to look up, per outlink or at all)
            return set()
        todo = [r for r in requests if self.could_avoid(r)]
        if not todo:
            return set()
        urls = [_defragged(r.url) for r in todo]
        try:
            verdicts = self.book.avoid_many(urls)
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            return set()
        out: set[Request] = set()
        found = []
        for request, url, verdict in zip(todo, urls, verdicts):
            if verdict is None:
                continue
            spec, target, explored, target_fp = verdict
            if explored:
                if scheduled:  # (counted as it is made, once: an outlink is checked at each page linking it too)
                    self.stats.inc_value("neardup/url_rules/explored")
                continue
            found.append((request, url, spec, target, target_fp))
        if not found:
            return out
        if scheduled:
            # never a request whose own page the store holds: stored before a kill, it is handed out again,
            # and the book, committed a second later, may not know it was fetched (an outlink to it is the
            # dupe filter's: not asked, so that repeated links cost no store query)
            own = self.twins([(url, target, target_fp) for _, url, _, target, target_fp in found])
            for entry, twin in zip(list(found), own):
                if twin is None:
                    self.stats.inc_value("neardup/url_rules/stored_itself")
                    found.remove(entry)
        named: list[tuple[str, str, int | None, str]] = []  # (url, target, its fingerprint, rule): lines to write
        for request, url, spec, target, target_fp in found:
            if self.book.confirmed_only(spec, url):
                if scheduled:
                    self._to_confirm(request, spec, target, target_fp)
                continue
            try:
                data: str | None = encode_request(self._as_made_again(request, referer), self.crawler.spider)
            except UnserializableRequest:
                data = None  # (it cannot be requeued should the rule be retired; the URL is in the duplicates file)
            try:
                first = self.book.record_avoided(url, spec, target, data, scheduled,
                                                 request.meta.get(ID_KEY) if scheduled else None)
            except FILE_ERRORS as exc:
                self._unavailable(exc)
                continue
            self._written += 1
            out.add(request)
            if first:
                self._avoided_here[url] = spec
                self.stats.inc_value(REQUESTS_AVOIDED)
                named.append((url, target, target_fp, spec))
        if named:
            # (named by the kept page: the rule's page may itself have been dropped as a near-duplicate)
            twins = self.twins([(url, target, target_fp) for url, target, target_fp, _ in named])
            for (url, target, _, spec), twin in zip(named, twins):
                self.duplicates.avoided(url, twin or target, spec, referer)
        return out

    def could_avoid(self, request: Request) -> bool:
        """Whether a rule may leave ``request`` out: not a ``dont_filter`` one (a start URL, a retry, a plain GET
        made again after its ranged GET), nor one marked to pass unchecked, nor a ranged GET already. O(1)."""
        return not request.dont_filter and not request.meta.get(self.skip_meta_key) and CONFIRM_KEY not in request.meta

    def close(self) -> None:
        self.book.close()

    # -- confirmation by content before the body (NEARDUP_URL_RULES_CONFIRM_BYTES)

    def _to_confirm(self, request: Request, spec: str, target: str, target_fp: int | None) -> None:
        """Make ``request`` a ranged GET of ``target``'s windows of text (the fetched page a rule says
        it copies: pages of one template share their first and last bytes, and often an inline style or
        script; ``_keep_head`` chose the windows), to be compared with those: a window of
        ``confirm_bytes / SLICES`` bytes at each of ``SLICES`` equal steps through the page's text, in one
        multi-range GET (a page sent in twice their answer's size or more, ``PART_HEADERS``,
        ``window.slice_windows``: a page that differs in a stretch of an eighth of its text or more is
        seen to), or every other one of them (a page sent in twice their answer or more: a quarter of
        its text), else one window of ``confirm_bytes``, which is also what a host that answered a
        multi-range GET whole, with one range or with 416 is asked for. Made whole
        when ``target``'s bytes are not known (its rule book unavailable) or it has no window of text.

        With ``If-Range: <target's ETag>`` when ``target`` had a strong one: a server answers
        the range only if the predicted page has that validator, else the whole body in the
        same response. The validator only picks the answer's form, it never confirms (files
        installed together share mtime and size, nginx's ETag): a page that is not a copy
        and has another ETag (a translated page, of another size) costs one request, not a
        ranged GET and then the whole; a copy is still confirmed by its bytes alone.

        Not for a rule under which a copy came whole (``_copy_came_whole``): there copies
        have ETags of their own (files written at other times, versioned trees), and
        ``If-Range`` would download every one of them."""
        if not self._ranges_pay(urlsplit(request.url).netloc):
            return  # (a plain GET, as a plain crawl's)
        try:
            found = self.book.store.heads([self._key(target)])[0]
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            found = None
        if found is None:
            self.stats.inc_value("neardup/url_rules/unconfirmable")
            return
        head, etag = found
        length = head_parts(head)[0]
        if length == 0:  # (a page with no window of text: its ETag alone was kept, ``_keep_head``)
            self.stats.inc_value("neardup/url_rules/unconfirmable")
            return
        if length <= 2 * self.confirm_bytes:
            # (a range of half the page or more saves next to nothing: a plain GET, as a plain crawl's; with
            # NEARDUP_URL_RULES_CONFIRM_BYTES past a page's size the "confirmed" bodies were downloaded whole)
            self.stats.inc_value("neardup/url_rules/too_short_to_confirm")
            return
        host = urlsplit(request.url).netloc
        # (what the page costs to download, compressed as it came: a multi-range answer, sent as it is, is
        # worth asking for when it is at most half of that; on a helper's gzipped mirrors, pages of 4-9 kB
        # sent as 1.5-3 kB, asking every copy for 16 windows took 1.05-1.13 times plain Scrapy's bytes)
        sent = length * self._sent_bytes[host] // self._whole_bytes[host] if self._whole_bytes[host] else length
        each = slice_size(self.confirm_bytes)
        windows, ranges = 1, head_ranges(head, self.confirm_bytes, windows=1)
        for n in (SLICES, SLICES // 2):
            tier = head_ranges(head, self.confirm_bytes, windows=n) \
                if each and sent >= 2 * n * (each + PART_HEADERS) and host not in self._single_range else []
            # (at least half of them: a page with less text than that is compared better by its one window)
            if len(tier) >= n // 2:
                windows, ranges = n, tier
                break
        request.headers[b"Range"] = "bytes=" + ",".join(f"{start}-{end - 1}" for start, end in ranges)
        # (a range of the bytes themselves: a server that compresses, as nginx with gzip on, answers a
        # compressed request whole and never with a range, so nothing would be saved)
        request.headers[b"Accept-Encoding"] = b"identity"
        if etag and not self.book.if_range_off(spec):
            # (the ETag the copy would have: the page's own, or as copies came whole under the rule)
            request.headers[b"If-Range"] = self.book.predicted_etag(spec, etag)
        request.meta[CONFIRM_KEY] = (spec, target, length, tuple(ranges), head_digest(head, windows), target_fp)

    def _ranges_pay(self, host: str) -> bool:
        """Whether a predicted copy on ``host`` is asked for as a ranged GET: not while at least
        ``MIN_RANGE_MISSES`` of the host's, and more than ``MAX_RANGE_MISS_SHARE`` of those answered there,
        confirmed nothing (a server answering 416 to every range, one that ignores ranges, or whose bytes
        change between requests: each miss costs a request more than a plain crawl, or a body sent
        uncompressed; a helper's 416 server: 727 requests against plain Scrapy's 502). Then one prediction in
        ``RANGE_RETRY_EVERY`` is still asked for as one, so that a host whose first answers were misses (a
        few translated pages first) is asked again once copies come. O(1)."""
        if not self._too_many_misses(host):
            return True
        self._range_retries[host] += 1
        return self._range_retries[host] % RANGE_RETRY_EVERY == 0

    def _too_many_misses(self, host: str) -> bool:
        """At least ``MIN_RANGE_MISSES`` of ``host``'s ranged GETs, and more than ``MAX_RANGE_MISS_SHARE`` of
        those answered there, confirmed nothing (``_ranges_pay``). O(1)."""
        misses = self._range_misses[host]
        return misses >= MIN_RANGE_MISSES and misses > MAX_RANGE_MISS_SHARE * self._ranged[host]

    def _missed(self, host: str) -> None:
        """A ranged GET on ``host`` that confirmed nothing (``_ranges_pay``); said once when they stop paying."""
        self._range_misses[host] += 1
        if self._too_many_misses(host) and host not in self._told_ranges:
            misses, answered = self._range_misses[host], self._ranged[host]
            self._told_ranges.add(host)
            logger.warning("ranged GETs do not pay on %s (%d of %d confirmed nothing: a server that refuses or "
                           "ignores ranges, whose bytes change between requests, or whose predicted copies are "
                           "often not copies, translated pages): its predicted copies are fetched whole, one in %d "
                           "asked for as a ranged GET still", host, misses, answered, RANGE_RETRY_EVERY)

    def _key(self, url: str) -> int:
        """A fetched page's key in the rule book's heads: its URL's 64-bit hash, seeded with the
        window's size and the heads' format (a crawl resumed with another ``confirm_bytes``, or a
        book written before the window's place was kept, finds none of the old heads)."""
        return mmh3.hash64(url, seed=self.confirm_bytes | HEADS_FORMAT << 24, signed=False)[0]

    def _keep_head(self, url: str, response: Response, head: int | None = None) -> None:
        """Keep ``url``'s head in the rule book: its body length, the places of its windows (one, and one per
        slice of the page) and the 24-bit hashes of their bytes (``window.page_head``: ``head``, made by the
        worker process with the fingerprint, or here if it is None), and its strong ``ETag`` if it has one (for
        ``If-Range``; an int and a short string a page, not its URL: on by default, it is kept for every page).
        The windows are the page's text (the one at its middle, else the middle of its longest stretch of text;
        a slice's where it has text: the template's style, script or menu, which every page of it shares,
        would confirm distinct pages of one length).
        Committed through the gate with the book (``mark``), before the page is acknowledged, so that
        after a kill and a resume the pages fetched before it still confirm their copies. A page with no
        window of text keeps a head of 0: its predicted copies are plain GETs
        (``neardup/url_rules/unconfirmable``). The bytes the page was sent in, against its body's, tell
        ``_to_confirm`` how much its host's pages cost to download (compressed or not). O(1) given ``head``."""
        if head is None:
            head = page_head(response.body, self.confirm_bytes)
        if head == 0:  # (kept, which confirms nothing: its ETag still tells ``_came_whole`` its answers)
            self.stats.inc_value("neardup/url_rules/window_not_text")
        # (a weak W/"..." may not be sent; nor the ETag of a compressed body, which the identity that a ranged GET
        # asks for never has: every If-Range came whole, uncompressed, 1.23 times plain's bytes under nginx's
        # gzip_static. But with no ETag for a compressed body's weak one, a translated page cost a ranged GET and
        # the whole, and a helper's gzipped mirrors saved 1-3%: ``_strong_etag``)
        etag = _strong_etag(response)
        sent = _sent_length(response) if _decoded(response) else len(response.body)
        ranged = response.request is not None and b"Range" in response.request.headers
        if head and sent and not ranged:  # (a ranged GET's whole answer comes as the identity, asked for)
            host = urlsplit(url).netloc
            self._sent_bytes[host] += sent
            self._whole_bytes[host] += len(response.body)
        try:
            self.book.store.set_heads([(self._key(url), head, etag)])
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            return
        self._written += 1

    def _came_whole(self, spec: str, url: str, copy: str) -> bool:
        """Whether the miss ``url`` != ``copy`` (fetched pages both) under rule ``spec`` cost no request
        more than a plain crawl makes: neither page was made whole after its ranged GET's bytes did not
        match (``confirmation``). A page that came whole in the answer to its ranged GET (another ETag than
        the one ``If-Range`` named: a translated page), or that was fetched as a plain GET (met before the
        rule acted, explored, or where ranges do not pay), cost a plain crawl's one request.
        For ``RuleBook``: such a miss leaves a rule that acts only through confirmation acting; the first
        that cost a request more retires it, so a rule costs at most one request more than a plain crawl.
        (A trap met before the rule acted, a page of its copy's ETag and other bytes fetched whole, retired
        the rule as if it had cost one: the mirror's ``api/`` rules, whose copies were then all downloaded
        whole.) O(1)."""
        return url not in self._made_whole and copy not in self._made_whole

    def _same_bytes(self, url: str, other: str) -> bool | None:
        """Whether fetched pages ``url`` and ``other`` are byte-for-byte the same, as far as their heads
        tell (length, the window's place and its hash: ``_keep_head``); None when a head is unknown or
        has no window. For ``RuleBook``: a prefix rule of such copies acts only through confirmation.
        One look-up round."""
        try:
            found = self.book.store.heads([self._key(url), self._key(other)])
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            return None
        mine, its = found
        if mine is None or its is None or not mine[0] or not its[0]:
            return None
        return mine[0] == its[0]

    def _copy_came_whole(self, request: Request, response: Response) -> None:
        """A ranged GET's whole answer (its ETag was not the predicted copy's, ``If-Range``): if its
        length and window are the predicted copy's, a copy came whole, its body downloaded
        for nothing. The ETags under its rule do not follow the content (copies written at other
        times: nginx's ETag is mtime and size). Where the copy's ETag differs from its page's in one
        part (the mtime), the rule's later ranged GETs carry their page's ETag with that part made
        as the copy's (``etags``, ``RuleBook.learn_etag_change``, ``neardup/url_rules/etag_learned``):
        copies are confirmed by their ranges, and a page that is not one, of another size, still
        comes whole in one request. Else the rule's ranged GETs go without ``If-Range``
        (``neardup/url_rules/if_range_off``): a copy is confirmed by its range, and a page that is
        not one costs a ranged GET and then the whole, which retires the rule (``_came_whole``).
        Either is kept with the rule in the rule book: a resumed crawl does not ask as before.
        O(the windows): their hash is the head's, made once more."""
        spec, target, length, ranges, digest, _ = _asked(request.meta[CONFIRM_KEY], self.confirm_bytes)
        body = response.body
        if self.book.if_range_off(spec) or len(body) != length or _digest(_joined(body, ranges)) != digest:
            return
        try:
            found = self.book.store.heads([self._key(target)])[0]
            if found is None:
                # (its page's head unknown: a request queued before an upgrade of the heads' format, or the book
                # unreadable then: nothing to learn its ETag's change from, and no reason to turn If-Range off)
                return
            page_etag = found[1]
            etag = _strong_etag(response)  # (read as the page's was, ``_keep_head``)
            sent = request.headers.get(b"If-Range")
            if sent is not None and etag == sent.decode("latin-1"):
                # (the ETag it named, and still the whole: a server that ignores Range, each answer uncompressed)
                self._missed(urlsplit(response.url).netloc)
                return
            if page_etag and etag is not None and etag in (page_etag, self.book.predicted_etag(spec, page_etag)):
                # (asked before the rule knew its copies' ETag, a request in flight or retried: known now; or a
                # copy with its page's own ETag where the others have their own, a tree partly linked: this copy
                # came whole, at a plain crawl's cost, and the rest is as it was)
                return
            change = change_of(page_etag, etag) if page_etag and etag is not None else None
            if change is not None and self.book.learn_etag_change(spec, change):
                self.stats.inc_value("neardup/url_rules/etag_learned")
                logger.info("URL rule %s: a copy came whole in the answer to its ranged GET (%s, ETag %s against "
                            "its page's %s): its ranged GETs carry ETags made so", spec, response.url, etag,
                            page_etag)
                return
            turned = self.book.turn_if_range_off(spec)
        except FILE_ERRORS as exc:
            self._unavailable(exc)
            return
        if turned:
            self.stats.inc_value("neardup/url_rules/if_range_off")
            logger.info("URL rule %s: a copy came whole in the answer to its ranged GET (%s, another ETag): "
                        "its ranged GETs go without If-Range", spec, response.url)

    def confirmation(self, request: Request, response: Response) -> Response | Request | None:
        """The answer to a ranged GET of ``_to_confirm``: None when its bytes and
        total length are the target's (a copy confirmed: noted as avoided, its body
        never downloaded); the request made whole (``dont_filter``: the dupe filter
        has seen it) when they differ; ``response`` itself when the server sent the
        whole body (the page's ETag is not the target's, ``If-Range``; or it ignores
        ranges). Validators never confirm: files installed together share mtime and size.
        A multi-range GET answered whole where no multi-range GET was answered in parts yet, or with
        fewer parts than it asked for, makes its host one asked for one window (``_single_range``,
        ``neardup/url_rules/multi_range_refused``: Amazon S3 and Varnish answer several ranges whole): the
        whole answer is used as is, the partial one asked again for the one window. O(the answer)."""
        spec, target, length, ranges, digest, target_fp = _asked(request.meta[CONFIRM_KEY], self.confirm_bytes)
        url = _defragged(request.url)
        host = urlsplit(url).netloc
        self._ranged[host] += 1
        multi = len(ranges) > 1
        sent = request.headers.get(b"If-Range")
        if response.status == 200 and multi and not self._multi_answered[host] \
                and (sent is None or response.headers.get(b"ETag") == sent):
            # (whole though the page has the ETag If-Range named, or asked without: not a miss, the host may well
            # answer one range; nor a copy come whole under another ETag, ``_copy_came_whole``, which the key's
            # absence skips. A page of another ETag, whole as If-Range asks, says nothing of it)
            self._refused_multi(host)
            self.stats.inc_value("neardup/url_rules/range_whole")
            request.meta.pop(CONFIRM_KEY, None)
            return response
        if response.status == 200:
            # (whole: another ETag than If-Range's, which costs what a plain crawl's request does, or, asked
            # without If-Range, a server that ignores ranges: a miss, so that a host that never answers with a
            # range is not asked for one, its bodies sent uncompressed)
            self.stats.inc_value("neardup/url_rules/range_whole")
            body = response.body
            # (asked with If-Range, of a host that never sent a range: a page of the predicted copy's length
            # whose window differs is one whose bytes change at every request, a token, with its ETag: each
            # such answer came whole, and uncompressed, 1.56 times plain's bytes on a helper's site. A page of
            # another length is a page that is not a copy, a translation, a request a plain crawl makes too;
            # one whose window matches is a copy under an ETag of its own, ``_copy_came_whole``)
            token_site = (not self._ranges_answered[host] and len(body) == length
                          and _digest(_joined(body, ranges)) != digest)
            if b"If-Range" not in request.headers or token_site:
                self._missed(host)
            return response
        if response.status not in (206, 416):
            # (a 404, a 5xx, a redirect: the answer a plain crawl's request gets too, used as is; made whole, it
            # came again, a request more)
            return response
        self.stats.inc_value("neardup/url_rules/ranged_gets")
        self.stats.inc_value("neardup/url_rules/ranged_bytes", len(response.body))
        # (parsed on the crawl's thread, 0.02-0.1 ms a kB, short lines the slowest: an answer far longer than the
        # windows asked for and their parts' headers, a server's or a hostile one's, is not parsed, and confirms
        # nothing)
        asked = sum(end - start for start, end in ranges) + len(ranges) * 4 * PART_HEADERS + 1024
        parts = answered_parts(response) if response.status == 206 and len(response.body) <= asked else []
        if parts:
            self._ranges_answered[host] += 1
        if multi and len(parts) > 1:
            self._multi_answered[host] += 1
        held = windows_in(parts, ranges, length) if parts else None
        refused = all(total == length for _, _, total in parts) if parts \
            else (response.status == 416 and not self._multi_answered[host]
                  and content_range(response.headers.get(b"Content-Range"))[2] in (None, length))
        if held is None and multi and refused:
            # (fewer parts than asked for, of the page's length: a server that answers one range; or 416 for a
            # page of its length, one that takes a single range only, aiohttp's and Werkzeug's static files: asked
            # again for the one window, a request more on each host that does)
            self._refused_multi(host)
            again = _as_plain_get(request)
            self._to_confirm(again, spec, target, target_fp)
            return again
        if held is not None and _digest(held) == digest:
            self.stats.inc_value(COPIES_CONFIRMED)
            self.stats.inc_value("neardup/url_rules/bytes_saved_estimate", max(0, length - len(response.body)))
            referer = request.headers.get("Referer")
            # (named by the kept page: ``target`` may itself have been dropped as a near-duplicate)
            twin = self.kept_twin(target, target_fp) if target_fp is not None else target
            self.duplicates.avoided(url, twin, spec, referer.decode("latin-1") if referer else None, confirmed=True,
                                    matched=target)
            return None
        self.stats.inc_value("neardup/url_rules/range_mismatch")
        self._missed(host)
        self._made_whole.add(url)  # (a miss that costs a request more than a plain crawl: see _came_whole)
        logger.info("ranged GET of %s does not match %s (rule %s): fetched whole", url, target, spec)
        return _as_plain_get(request)

    def _refused_multi(self, host: str) -> None:
        """``host`` answered a multi-range GET whole or with one range: its predicted copies are asked for one
        window from now on (``_to_confirm``), said once. O(1)."""
        if host not in self._single_range:
            self._single_range.add(host)
            self.stats.inc_value("neardup/url_rules/multi_range_refused")
            logger.info("%s answered a multi-range GET whole or in one range: its predicted copies are asked for "
                        "one window of %d bytes", host, self.confirm_bytes)

    @staticmethod
    def _as_made_again(request: Request, referer: str | None) -> Request:
        """``request`` as a retirement would make it: with the linking page as its
        ``Referer`` (Scrapy's default policy sends the full URL within a site, and
        rules are per host), without the frontier's marks of the request it came from."""
        if (referer and b"Referer" not in request.headers) or ID_KEY in request.meta \
                or EMIT_AGAIN_KEY in request.meta:
            request = request.copy()
            request.meta.pop(ID_KEY, None)
            request.meta.pop(EMIT_AGAIN_KEY, None)
            if referer:
                request.headers.setdefault(b"Referer", referer)
        return request

    def _withdraw(self, url: str, spec: str, retired: bool = False) -> None:
        """``url``, avoided by ``spec``, is requested after all (``retired``: by a
        retirement; else it was on its way already): no longer a request avoided."""
        if self._avoided_here.pop(url, None) is not None:
            self.stats.inc_value(REQUESTS_AVOIDED, -1)
        self.duplicates.requeued(url, spec, retired)

    @staticmethod
    def _arrived(response: Response, request: Request) -> None:
        """A response as the downloader got it, before Scrapy decodes its body: a compressed one marks its
        request (``ENCODED_KEY``: its ``ETag`` is not the identity's, ``_keep_head``). O(1)."""
        if response.headers.get(b"Content-Encoding"):
            request.meta[ENCODED_KEY] = len(response.body) or True  # (the bytes sent: ``_keep_head``)
        else:  # (a redirect's request hands its meta on to the next)
            request.meta.pop(ENCODED_KEY, None)

    def _downloaded(self, response: Response, request: Request) -> None:
        """A response came: if its URL was counted as avoided (a request for it
        was in flight when an outlink to it was left out), it is not. O(1).
        (Its head is kept with its verdict, ``learn``: it is made in the worker process.)"""
        url = _defragged(request.url)
        if self.confirm_bytes and response.status == 200 and CONFIRM_KEY in request.meta:
            self._copy_came_whole(request, response)
        spec = self._avoided_here.get(url)
        if spec is not None:
            self._withdraw(url, spec)

    # -- the gate of the durable frontier: avoided requests noted before their page is acknowledged

    def mark(self) -> int:
        return self._written

    def settled(self, token: int) -> bool:
        if self._synced < token:
            try:
                self.book.store.commit()
            except FILE_ERRORS as exc:
                self._unavailable(exc)
                return False
            self._synced = self._written
        return True

    # -- retirements ------------------------------------------------------------------

    def _engine(self) -> Any:
        """The crawl's engine, or None before it is made (reading an unset ``Crawler.engine`` raises
        ``RuntimeError`` in the Scrapy versions this runs on; it gave None before)."""
        try:
            return self.crawler.engine
        except RuntimeError:
            return None

    def _scheduler(self, name: str) -> Any:
        """The engine's scheduler if its class is or derives from the class called ``name``."""
        # (the engine keeps its scheduler in its slot; Scrapy offers no public accessor; not
        # isinstance: Scrapy's BaseScheduler answers it for any scheduler with its methods)
        scheduler: Any = getattr(getattr(self._engine(), "_slot", None), "scheduler", None)
        return scheduler if any(c.__name__ == name for c in type(scheduler).__mro__) else None

    def _durable(self) -> DurableScheduler | None:
        """The crawl's durable frontier, when it has one open (``JOBDIR``)."""
        scheduler = self._scheduler(DurableScheduler.__name__)
        return cast(DurableScheduler, scheduler) if scheduler is not None and scheduler.is_open else None

    def _shared(self) -> tuple[ReliableRedisScheduler, str | None] | None:
        """The crawl's shared frontier, and the shared rule book's hash of avoided requests when the
        book is on the frontier's Redis server (one server, not a Cluster): then a retired rule's
        requests are claimed from the book and queued in one step; else (None) each is queued under
        a mark in the frontier's slot and forgotten by the book after (``push_marked``)."""
        scheduler = self._scheduler("ReliableRedisScheduler")  # (by name: scrapy-redis is an extra)
        if scheduler is None:
            return None
        store: Any = self.book.store
        if hasattr(store, "avoided_key") and scheduler.shares_server(store.client):
            return cast("ReliableRedisScheduler", scheduler), str(store.avoided_key)
        return cast("ReliableRedisScheduler", scheduler), None

    def _resume(self) -> None:
        """Retired rules whose avoided requests a kill kept from the frontier: queue them now."""
        try:
            for st in self.book.unreleased():
                self._requeue(st)
        except FILE_ERRORS as exc:
            self._unavailable(exc)

    def _requeue(self, st: RuleState) -> None:
        """Make the requests retired rule ``st`` avoided, after all (see the module docstring)."""
        spec = st.rule.spec
        if self._engine() is None or self.crawler.spider is None:
            # (no crawl to queue them in: they stay in the rule book, queued when a crawl of it starts)
            logger.info("URL rule %s retired before the crawl started: its avoided requests stay in the rule "
                        "book", spec)
            return
        durable = self._durable()
        shared = self._shared() if durable is None else None
        # (with a frontier that outlives the process, kept in the book until queued: a kill between loses none)
        rows = self.book.release(st, claim=durable is None and shared is None)
        decoded = self._decoded(rows, spec)  # (one at a time, as each is queued)
        if shared is not None:
            requests = [(row, r) for row, r in decoded if r is not None]
            lost = len(rows) - len(requests)
            made, skipped = self._push_shared(*shared, spec, rows, requests)
        else:
            made, skipped, lost = self._crawl_here(durable, spec, decoded)
            if durable is not None:
                durable.commit()  # the requests and their marks, in one frontier transaction
                self.book.forget(rows)  # then the rule book lets them go
        self.stats.inc_value("neardup/url_rules/requeued", made)
        how = "" if shared is None else (" (claimed from the shared rule book and queued in one step)"
                                         if shared[1] is not None else " (each queued under a mark, then let go)")
        logger.info("URL rule %s retired: %d request(s) it avoided are made after all%s%s%s", spec, made,
                    f" ({lost} could not be)" if lost else "",
                    f" ({skipped} queued before the last stop)" if skipped else "", how)

    def _decoded(self, rows: list[Avoided], spec: str) -> Iterator[tuple[Avoided, Request | None]]:
        """Each released row with its request, or None if it cannot be made (none kept, or corrupt)."""
        for row in rows:
            if row.request is None:
                yield row, None
                continue
            try:
                request = decode_request(row.request, self.crawler.spider)
            except CorruptRequest as exc:
                logger.warning("could not requeue a request rule %s avoided: %s", spec, exc)
                yield row, None
                continue
            # (one that passed the dupe filter already would be refused by it: made once, unfiltered)
            yield row, request.replace(dont_filter=True) if row.scheduled else request

    def _crawl_here(self, durable: DurableScheduler | None, spec: str,
                    decoded: Iterable[tuple[Avoided, Request | None]]) -> tuple[int, int, int]:
        """Queue them in this process's frontier: the durable one (each marked in the transaction
        that queues it, and a row of its URL still waiting superseded; the caller commits) or
        Scrapy's own queues. Returns (made, skipped: queued before a kill, lost: cannot be made)."""
        engine = self._engine()
        made = skipped = lost = 0
        for row, request in decoded:
            if request is None:
                lost += 1
                continue
            if durable is not None:
                if not durable.db.mark_once(f"url-rule-requeue {spec} {row.url}"):
                    skipped += 1  # (queued before a kill, in a transaction the frontier committed)
                    continue
                if row.scheduled and row.frontier_id is not None:
                    self._supersede(durable, row.frontier_id, row.url)
            engine.crawl(request)
            made += 1
            self._withdraw(row.url, spec, retired=True)
        return made, skipped, lost

    def _push_shared(self, frontier: ReliableRedisScheduler, claim_key: str | None, spec: str,
                     rows: list[Avoided], requests: list[tuple[Avoided, Request]]) -> tuple[int, int]:
        """Queue them in the shared frontier (see ``_shared``), then let the rule book forget what
        is queued or cannot be made. Returns (made, skipped: queued before a kill)."""
        pushed: list[int] | None  # (per request: 1 queued, 0 seen by the dupe filter, -1 not ours)
        try:
            if claim_key is not None:
                # claimed from the shared book and queued in one step: a kill leaves them in the book
                # (queued at the next start, ``unreleased``) or queued, and a process releasing them
                # too queues none
                pushed = [1 if mine else -1 for mine in
                          frontier.push_claimed(claim_key, [(row.url, r) for row, r in requests])]
            else:
                # queued under a mark each in the frontier's own slot, then forgotten by the book: a
                # kill in between leaves them in the book and queued, and the next start's requeue
                # finds their marks (a Redis Cluster: the book's keys and the queue's are in other slots)
                pushed = frontier.push_marked([(f"url-rule-requeue {spec} {row.url} {row.nonce}", r)
                                               for row, r in requests])
        except Exception as exc:  # (Redis away: they stay in the book, for the next start)
            logger.warning("URL rule %s retired: its %d avoided request(s) could not be queued (%r); they "
                           "stay in the rule book and are queued when a crawl of it starts", spec,
                           len(requests), exc)
            pushed = None
        made = skipped = 0
        for (row, _), got in zip(requests, pushed or ()):
            if got >= 0:
                made += 1
                self._withdraw(row.url, spec, retired=True)
            elif claim_key is None:
                skipped += 1
        # the book lets go of those that cannot be made and, once marked and queued, the others (those
        # claimed in one step are gone from it; those not queued, Redis away, stay for the next start)
        keep = {row.url for row, _ in requests} if claim_key is not None or pushed is None else set()
        self.book.forget([row for row in rows if row.url not in keep])
        return made, skipped

    def _supersede(self, durable: DurableScheduler, rid: int, url: str) -> None:
        """The request left out as frontier row ``rid`` is queued again: if the row
        is still there (not acknowledged yet: in flight, or redelivered after a kill),
        acknowledge it in the transaction that queues its copy, so that a kill never
        leaves both to be fetched. The row must still be that URL's (ids of
        acknowledged rows can be reused)."""
        data = durable.db.data_of(rid)
        if data is None:
            return
        try:
            same = _defragged(decode_request(data, self.crawler.spider).url) == url
        except CorruptRequest:
            return
        if same:
            durable.db.ack([rid])
            AckTracker.of(self.crawler).superseded(rid)

    def _unavailable(self, exc: BaseException) -> None:
        """The rule book cannot be read or written: nothing is learned or
        avoided meanwhile; the crawl goes on."""
        self.stats.inc_value("neardup/url_rules/unavailable")
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            logger.warning("URL rules unavailable (%s: %s): requests are made and nothing is learned until "
                           "they are back", type(exc).__name__, exc)
