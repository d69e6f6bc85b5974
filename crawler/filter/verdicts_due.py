"""Requests that wait for the verdicts of the pages above them, so that a rule those verdicts make acts on them.

A learned URL rule comes from a page's verdict: a page found to copy another URL's suggests the rule
(``url_rules.rules.derive``), and a sub-tree rule, one directory deeper, from the section's own pages. A site
whose every page links every other (MkDocs, Hugo and most themes that list the whole navigation in each page)
queues a language's pages all at once, from its front page; from a server as fast as loopback they are then
downloaded a few milliseconds apart, while the first of a section waits in the workers' queue for its
fingerprint (about a second behind at full speed: Scrapy lets 5 MB of responses wait there). The rule that page
makes comes after the section's pages were all fetched: 0% of MkDocs mirror's copies were spared, where the
same site gzipped, whose answers come slower, spared 60%.

So, on a host where the rule book has a rule (a copy of another URL's page was seen there: elsewhere nothing
waits), a request that could be left out (``LearnedRules.could_avoid``) waits just before its download
(``AvoidMiddleware``) for the verdicts of the pages that, as it arrives, await theirs in its directory or a
directory above it (a page is in the directory its path ends in, ``/de/guide/a/`` in ``/de/guide/`` as
``/de/guide/a.html`` is: a section's pages hold each other, since Scrapy's default order fetches them before
their index page; the host's root aside, which holds every path), then asks the rule book. Pages that begin to wait after it do not hold it: a flat directory's downloads and
verdicts still overlap. A held request keeps a slot of ``CONCURRENT_REQUESTS`` (Scrapy counts it as in
progress) but not of its host's (it is not in its host's queue yet, and Scrapy's default queue takes the host
for idle): at most ``max_held`` wait at once (half the crawl's slots), the next ones go on unheld, so that the
crawl's other hosts keep the other half. A request waits at most ``HOLD_MAX`` seconds (a worker stuck on a
hostile page, a callback that awaits something slow: a page's verdict comes after its callback).

>>> due = VerdictsDue(lambda host: True)
>>> token = due.begin("http://h/de/tutorial/part-0/")
>>> due.above("http://h/de/tutorial/part-1/"), due.above("http://h/de/howto/"), due.above("http://h/de/")
(True, False, False)
>>> due.end(token); due.above("http://h/de/tutorial/part-1/")
False
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

#: Seconds a request waits at most for the verdicts above it: a verdict is milliseconds, about a second behind a
#: backlog at full speed from loopback; a worker stuck on a hostile page takes up to ``NEARDUP_WORKER_TIMEOUT``
#: and a callback that awaits something slow as long as it takes, and the crawl goes on (5 s: a user's callback
#: that awaited 8 s stalled its host for 2 s, every slot of the wait held by requests bound to time out)
HOLD_MAX = 2.0

Token = tuple[str, str, int]  # (host, a directory's path ending with "/", the page's number)


def _host_and_path(url: str) -> tuple[str, str]:
    """Lower-case host (with its port) and path, without query or fragment. O(len(url))."""
    parts = urlsplit(url)
    return parts.netloc.lower(), parts.path or "/"


def _directory(path: str) -> str:
    """The directory a page is in: its path up to its last slash, a directory URL's up to the slash before
    (``/de/guide/a/`` is in ``/de/guide/``, as ``/de/guide/a.html`` is: a sibling's verdict makes the rules
    of their section as much as its index page's does).

    >>> _directory("/de/guide/a.html"), _directory("/de/guide/a/"), _directory("/de/"), _directory("/")
    ('/de/guide/', '/de/guide/', '/', '/')
    """
    trimmed = path[:-1] if path.endswith("/") else path
    return trimmed[: trimmed.rfind("/") + 1] or "/"


class VerdictsDue:
    """Pages awaiting their verdict, by directory, and requests waiting for them (see the module docstring).
    ``has_rules(host)``: whether the rule book has a rule for the host; ``max_held``: requests waiting at once,
    at most. ``begin``, ``end`` and ``above`` are O(the path's depth)."""

    def __init__(self, has_rules: Callable[[str], bool], stats: StatsCollector | None = None,
                 clock: Any = None, max_held: int = 8) -> None:
        self.has_rules = has_rules
        self.stats = stats
        self.clock = clock  # (an ``IReactorTime``: the crawl's reactor unless given, a test's ``task.Clock``)
        self.max_held = max(1, max_held)
        self.held = 0  # (requests waiting now)
        self._next = 0
        self._due: dict[str, dict[str, set[int]]] = {}  # host -> {directory: its pages awaiting their verdict}
        self._waiting: dict[int, list[Deferred[None]]] = {}  # page -> requests waiting for its verdict
        self._open: set[int] = set()  # (the pages due)

    def begin(self, url: str) -> Token:
        """A page of ``url`` awaits its verdict: the token ``end`` takes."""
        host, path = _host_and_path(url)
        self._next += 1
        token = (host, _directory(path), self._next)
        self._due.setdefault(host, {}).setdefault(token[1], set()).add(self._next)
        self._open.add(self._next)
        return token

    def end(self, token: Token) -> None:
        """Its verdict is in (or it never comes): the requests waiting for it go on, once nothing else they
        wait for is due. A token ended twice changes nothing."""
        host, directory, page = token
        due = self._due.get(host)
        pages = due.get(directory) if due is not None else None
        if pages is None or page not in pages:
            return
        pages.discard(page)
        self._open.discard(page)
        if not pages:
            del due[directory]  # type: ignore[union-attr]
            if not due:
                del self._due[host]
        for waiter in self._waiting.pop(page, ()):
            if not waiter.called:
                waiter.callback(None)

    def _pages_above(self, url: str) -> set[int]:
        host, path = _host_and_path(url)
        due = self._due.get(host)
        if not due or not self.has_rules(host):
            return set()
        pages: set[int] = set()
        slash = path.find("/", 1)  # (from the first directory below the root: "/" would hold the whole host)
        while slash > 0:
            pages |= due.get(path[: slash + 1], set())
            slash = path.find("/", slash + 1)
        return pages

    def above(self, url: str) -> bool:
        """Whether a page in ``url``'s directory or above it awaits its verdict (on a host with rules)."""
        return bool(self._pages_above(url))

    async def wait(self, url: str) -> None:
        """Until the pages in ``url``'s directory or above it that await their verdict now have it, or
        ``HOLD_MAX`` seconds; at once when ``max_held`` requests wait already."""
        pages = self._pages_above(url)
        if not pages:
            return
        if self.held >= self.max_held:
            if self.stats is not None:
                self.stats.inc_value("neardup/url_rules/not_held")
            return
        if self.clock is None:
            from twisted.internet import reactor  # (the crawl's, installed by now)

            self.clock = reactor
        if self.stats is not None:
            self.stats.inc_value("neardup/url_rules/held")
        self.held += 1
        logger.debug("near-duplicate filter: %s waits for the verdicts of %d page(s) in its directory or above it",
                     url, len(pages))
        try:
            if not await self._wait_for(pages):
                logger.debug("near-duplicate filter: %s goes on after %g s without them", url, HOLD_MAX)
        finally:
            self.held -= 1

    async def _wait_for(self, pages: set[int]) -> bool:
        """Whether the verdicts came before ``HOLD_MAX``."""
        deadline = self.clock.seconds() + HOLD_MAX
        while pages := pages & self._open:
            left = deadline - self.clock.seconds()
            if left <= 0:
                if self.stats is not None:
                    self.stats.inc_value("neardup/url_rules/held_too_long")
                return False
            waiter: Deferred[None] = Deferred()
            for page in pages:
                self._waiting.setdefault(page, []).append(waiter)
            timer = self.clock.callLater(left, lambda w=waiter: w.called or w.callback(None))
            await maybe_deferred_to_future(waiter)
            if timer.active():  # (ended before its time)
                timer.cancel()
            for page in pages:  # (a waiter fired by one page is dropped from the others' lists)
                if (others := self._waiting.get(page)) is not None and waiter in others:
                    others.remove(waiter)
                    if not others:
                        del self._waiting[page]
        return True

    def release_all(self) -> None:
        """The crawl ends: every waiter goes on."""
        self._due.clear()
        self._open.clear()
        waiting, self._waiting = self._waiting, {}
        for waiters in waiting.values():
            for waiter in waiters:
                if not waiter.called:
                    waiter.callback(None)
