"""Requests that wait for the verdicts of the pages above them (``crawler.filter.verdicts_due``), as asyncio
tasks (the crawl's reactor is asyncio's) timed by a ``task.Clock``; the crawl that needs them is
``test_url_rules_mirror``'s MkDocs test."""

from __future__ import annotations

import asyncio
import functools

from scrapy.statscollectors import MemoryStatsCollector
from twisted.internet.task import Clock

from scrapy_neardup.crawler.filter.verdicts_due import HOLD_MAX, VerdictsDue


class _Crawler:
    spider = None

    class settings:  # noqa: N801 (what MemoryStatsCollector reads)
        @staticmethod
        def getbool(name: str, default: bool = False) -> bool:
            return default


def _due(has_rules=lambda host: True):
    stats = MemoryStatsCollector(_Crawler())
    clock = Clock()
    return VerdictsDue(has_rules, stats, clock), clock, stats


def _wait(due: VerdictsDue, url: str) -> asyncio.Task:
    return asyncio.ensure_future(due.wait(url))


async def _turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _in_a_loop(test):
    @functools.wraps(test)
    def run():
        asyncio.run(test())
    return run


@_in_a_loop
async def test_a_request_below_a_page_awaiting_its_verdict_waits_for_it():
    due, clock, stats = _due()
    token = due.begin("http://h/de/tutorial/part-0/")  # (in /de/tutorial/)
    below = _wait(due, "http://h/de/tutorial/part-1/")
    beside = _wait(due, "http://h/de/howto/part-1/")  # (another directory: not below it)
    await _turns()
    assert not below.done() and beside.done()
    due.end(token)
    await _turns()
    assert below.done()
    assert stats.get_value("neardup/url_rules/held") == 1
    assert stats.get_value("neardup/url_rules/held_too_long") is None


def test_a_page_holds_the_directory_it_is_in_and_those_below():
    """A file is in its directory, a directory URL in the one above it: a sibling's verdict, as much as its
    section's index page's, may make the rule of their section."""
    due, _, _ = _due()
    due.begin("http://h/de/api/p3.html")
    due.begin("http://h/fr/api/p3/")
    assert due.above("http://h/de/api/p4.html") and due.above("http://h/de/api/sub/p5.html")
    assert not due.above("http://h/de/p1.html")
    assert due.above("http://h/fr/api/p1/") and due.above("http://h/fr/api/p1/x/")
    assert not due.above("http://h/fr/guide/") and not due.above("http://h/es/api/p1/")
    assert not due.above("http://other/de/api/p4.html")  # (another host)


@_in_a_loop
async def test_nothing_waits_for_the_root_nor_on_a_host_without_rules():
    """The root's directory holds every path of the host; a host where no copy was seen has no rule to wait for."""
    due, _, _ = _due(has_rules=lambda host: host == "ruled")
    due.begin("http://ruled/index.html")
    due.begin("http://ruled/about.html")
    assert not due.above("http://ruled/de/index.html")
    due.begin("http://plain/de/index.html")
    assert not due.above("http://plain/de/p1.html")
    task = _wait(due, "http://plain/de/p1.html")
    await _turns()
    assert task.done()


@_in_a_loop
async def test_it_waits_for_every_page_above_it():
    due, _, _ = _due()
    a = due.begin("http://h/de/intro/")  # (in /de/)
    b = due.begin("http://h/de/guide/p0/")
    c = due.begin("http://h/de/guide/p0/")  # (two pages of one directory)
    d = _wait(due, "http://h/de/guide/p1/")
    due.end(b)
    await _turns()
    assert not d.done()
    due.end(c)
    await _turns()
    assert not d.done()  # (still /de/'s)
    due.end(a)
    await _turns()
    assert d.done()
    due.end(a)  # (a token ended twice changes nothing)
    assert not due.above("http://h/de/guide/p1/")


@_in_a_loop
async def test_a_verdict_that_never_comes_holds_a_request_at_most_hold_max_seconds():
    due, clock, stats = _due()
    due.begin("http://h/de/intro/")
    d = _wait(due, "http://h/de/p1.html")
    await _turns()
    clock.advance(HOLD_MAX - 0.01)
    await _turns()
    assert not d.done()
    clock.advance(0.02)
    await _turns()
    assert d.done()
    assert stats.get_value("neardup/url_rules/held_too_long") == 1
    assert not clock.getDelayedCalls()


@_in_a_loop
async def test_an_ended_wait_leaves_no_timer_and_no_waiter():
    due, clock, _ = _due()
    token = due.begin("http://h/de/intro/")
    d = _wait(due, "http://h/de/p1.html")
    due.end(token)
    await _turns()
    assert d.done() and not clock.getDelayedCalls() and not due._waiting and not due._due


@_in_a_loop
async def test_the_crawls_end_lets_every_waiter_go():
    due, _, _ = _due()
    due.begin("http://h/de/intro/")
    waits = [_wait(due, f"http://h/de/p{i}.html") for i in range(3)]
    due.release_all()
    await _turns()
    assert all(d.done() for d in waits)
    assert not due.above("http://h/de/p1.html")


@_in_a_loop
async def test_pages_that_begin_after_a_request_waits_do_not_hold_it():
    """A flat directory's downloads and verdicts still overlap: a request waits for the pages due as it
    arrives, not for the pages downloaded while it waits (which would hold a directory in lock-step)."""
    due, _, _ = _due()
    first = due.begin("http://h/p/1.html")
    d = _wait(due, "http://h/p/9.html")
    await _turns()
    later = due.begin("http://h/p/2.html")
    due.end(first)
    await _turns()
    assert d.done()
    assert due.above("http://h/p/9.html")  # (a request arriving now waits for the later one)
    due.end(later)


@_in_a_loop
async def test_at_most_max_held_requests_wait_at_once():
    """A held request keeps one of the crawl's slots but none of its host's: past ``max_held`` the next go on
    unheld, so that the crawl's other hosts keep their share."""
    stats = MemoryStatsCollector(_Crawler())
    due = VerdictsDue(lambda host: True, stats, Clock(), max_held=2)
    token = due.begin("http://h/de/intro/")
    held = [_wait(due, f"http://h/de/p{i}.html") for i in range(3)]
    await _turns()
    assert [d.done() for d in held] == [False, False, True] and due.held == 2
    assert stats.get_value("neardup/url_rules/not_held") == 1
    due.end(token)
    await _turns()
    assert all(d.done() for d in held) and due.held == 0
