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
waits), a request waits just before its download (``AvoidMiddleware``) while a page in its directory or a
directory above it (a directory URL being its own directory; the host's root aside, which holds every path)
awaits its verdict, then asks the rule book. Waiting costs the crawl nothing a real server's latency does not
already hide: the wait is one verdict's, and a held request keeps a slot of ``CONCURRENT_REQUESTS``, so the
crawl downloads no faster than it fingerprints on such a host. At most ``HOLD_MAX`` seconds (a worker stuck on a
hostile page).

>>> due = VerdictsDue(lambda host: True)
>>> token = due.begin("http://h/de/tutorial/")
>>> due.above("http://h/de/tutorial/part-1/"), due.above("http://h/de/howto/"), due.above("http://h/de/")
(True, False, False)
>>> due.end(token); due.above("http://h/de/tutorial/part-1/")
False
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

#: Seconds a request waits at most for the verdicts above it (a verdict is milliseconds, about a second behind a
#: backlog; a worker stuck on a hostile page takes up to ``NEARDUP_WORKER_TIMEOUT``, and the crawl goes on)
HOLD_MAX = 5.0

Key = tuple[str, str]  # (host, a directory's path, ending with "/")


def _host_and_path(url: str) -> tuple[str, str]:
    """Lower-case host (with its port) and path, without query or fragment. O(len(url))."""
    parts = urlsplit(url)
    return parts.netloc.lower(), parts.path or "/"


def _directory(path: str) -> str:
    """A page's directory: its path up to its last slash (a directory URL is its own)."""
    return path[: path.rfind("/") + 1] or "/"


class VerdictsDue:
    """Pages awaiting their verdict, by directory, and requests waiting for them (see the module docstring).
    ``has_rules(host)``: whether the rule book has a rule for the host. ``begin``, ``end`` and ``above`` are
    O(the path's depth)."""

    def __init__(self, has_rules: Callable[[str], bool], stats: StatsCollector | None = None,
                 clock: Any = None) -> None:
        self.has_rules = has_rules
        self.stats = stats
        self.clock = clock  # (an ``IReactorTime``: the crawl's reactor unless given, a test's ``task.Clock``)
        self._due: dict[str, Counter[str]] = {}  # host -> {directory: pages awaiting their verdict}
        self._waiting: dict[Key, list[Deferred[None]]] = {}

    def begin(self, url: str) -> Key:
        """A page of ``url`` awaits its verdict: the token ``end`` takes."""
        host, path = _host_and_path(url)
        key = (host, _directory(path))
        self._due.setdefault(host, Counter())[key[1]] += 1
        return key

    def end(self, key: Key) -> None:
        """Its verdict is in (or it never comes): once its directory has none due, its waiters go on."""
        host, directory = key
        due = self._due.get(host)
        if due is None or due[directory] <= 0:
            return
        due[directory] -= 1
        if due[directory] == 0:
            del due[directory]
            if not due:
                del self._due[host]
            for waiter in self._waiting.pop(key, ()):
                if not waiter.called:
                    waiter.callback(None)

    def _keys_above(self, url: str) -> list[Key]:
        host, path = _host_and_path(url)
        due = self._due.get(host)
        if not due or not self.has_rules(host):
            return []
        keys = []
        slash = path.find("/", 1)  # (from the first directory below the root: "/" would hold the whole host)
        while slash > 0:
            if path[: slash + 1] in due:
                keys.append((host, path[: slash + 1]))
            slash = path.find("/", slash + 1)
        return keys

    def above(self, url: str) -> bool:
        """Whether a page in ``url``'s directory or above it awaits its verdict (on a host with rules)."""
        return bool(self._keys_above(url))

    async def wait(self, url: str) -> None:
        """Until no page in ``url``'s directory or above it awaits its verdict, or ``HOLD_MAX`` seconds."""
        keys = self._keys_above(url)
        if not keys:
            return
        if self.clock is None:
            from twisted.internet import reactor  # (the crawl's, installed by now)

            self.clock = reactor
        if self.stats is not None:
            self.stats.inc_value("neardup/url_rules/held")
        deadline = self.clock.seconds() + HOLD_MAX
        while keys:
            left = deadline - self.clock.seconds()
            if left <= 0:
                if self.stats is not None:
                    self.stats.inc_value("neardup/url_rules/held_too_long")
                return
            waiter: Deferred[None] = Deferred()
            for key in keys:
                self._waiting.setdefault(key, []).append(waiter)
            timer = self.clock.callLater(left, lambda w=waiter: w.called or w.callback(None))
            await maybe_deferred_to_future(waiter)
            if timer.active():  # (ended before its time)
                timer.cancel()
            for key in keys:  # (a waiter fired by one key is dropped from the others' lists)
                if (others := self._waiting.get(key)) is not None and waiter in others:
                    others.remove(waiter)
                    if not others:
                        del self._waiting[key]
            keys = self._keys_above(url)

    def release_all(self) -> None:
        """The crawl ends: every waiter goes on."""
        self._due.clear()
        waiting, self._waiting = self._waiting, {}
        for waiters in waiting.values():
            for waiter in waiters:
                if not waiter.called:
                    waiter.callback(None)
