"""``neardup crawl``: Scrapy in this process (``CrawlerProcess``) with the ready
spider (``scrapy_neardup.crawler.spiders.site``), both add-ons (the filter and
the polite profile) and no Scrapy project, from any directory. It writes kept
pages to ``DIR/pages.jsonl``, the full-text index to ``DIR/index.sqlite3``, the
fingerprint store to ``DIR/store`` (persistent: a second run skips what the
first kept) and every drop to ``DIR/store/duplicates.jsonl``. DIR defaults to
``./out/crawl`` (``./out/demo`` for the demo, which starts from nothing each
time). Its URLs, ``-s`` settings and ``-a`` spider arguments are checked
before anything starts; after the crawl it prints its report only if the
crawl did its job (``CrawlOutcome``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import fail

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import Settings

    from ..counts import CrawlCounts

#: Finish reasons of a crawl that did its job: it ran out of pages, or hit a limit the user set.
COMPLETE = frozenset({"finished", "max_pages", "closespider_pagecount", "closespider_itemcount",
                      "closespider_timeout", "closespider_pagecount_no_item", "closespider_timeout_no_item"})
#: Finish reasons of a crawl stopped from outside (Ctrl-C, SIGTERM): the same command goes on.
STOPPED = frozenset({"shutdown"})
SPIDER_ARGUMENTS = ("allow", "deny", "max_depth", "max_pages", "stay_on_host")


@dataclass
class CrawlOutcome:
    """How a crawl ended. ``failure``: why it did not do its job (None: it did);
    ``stopped``: stopped from outside before its end (the same command goes on)."""

    finish_reason: str | None
    failure: str | None = None
    stopped: bool = False
    counts: CrawlCounts | None = None  # the filter's counts (None: it was off)

    @property
    def exit_code(self) -> int:
        return 1 if self.failure or self.stopped else 0


class _Fetches:
    """The responses to the spider's own requests (robots.txt and other
    ``NO_CALLBACK`` downloads left out), counted as the crawl goes: how many
    were pages (status below 400), and the statuses of the others."""

    def __init__(self, crawler: Crawler) -> None:
        from scrapy import signals

        self.pages = 0
        self.error_statuses: Counter[int] = Counter()
        crawler.signals.connect(self.response_received, signal=signals.response_received)

    def response_received(self, response: Response, request: Request) -> None:
        from scrapy.http.request import NO_CALLBACK

        if request.callback is NO_CALLBACK:
            return
        if response.status < 400:
            self.pages += 1
        else:
            self.error_statuses[response.status] += 1


#: What a demo crawl writes in its ``--out`` (``crawl_settings``, not resumable): all a new demo removes
DEMO_OUTPUTS = frozenset({"pages.jsonl", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm", "store"})


def _clear_demo_outputs(out: Path) -> str | None:
    """Remove an earlier demo's outputs from ``out`` (the demo starts from nothing each time), or say why
    not: ``out`` holds something else, which is never removed (``--out`` may name any directory)."""
    if not out.exists():
        return None
    others = sorted(p.name for p in out.iterdir() if p.name not in DEMO_OUTPUTS)
    if others:
        return (f"--out {out} holds files a demo crawl did not write ({', '.join(others[:3])}"
                f"{', ...' if len(others) > 3 else ''}); the demo starts from nothing: give it a new or empty "
                "directory")
    for name in DEMO_OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return None


def crawl_settings(out: Path, settings: dict[str, str], resumable: bool) -> Settings:
    """The settings of ``neardup crawl`` into ``out``, with the user's ``-s`` over them."""
    from scrapy.settings import Settings

    s = Settings()
    s.setdict({
        "ADDONS": {"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.PoliteCrawlAddon": 0},
        "FEEDS": {str(out / "pages.jsonl"): {"format": "jsonlines", "overwrite": not resumable,
                                             "encoding": "utf-8"}},
        "NEARDUP_STORE": str(out / "store"),
        **({"JOBDIR": str(out / "job")} if resumable else {}),
        "NEARDUP_INDEX": str(out / "index.sqlite3"),
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }, priority="project")
    s.setdict(settings, priority="cmdline")
    return s


def crawl(urls: list[str], out: Path, settings: dict[str, str], spider_args: dict[str, str],
          resumable: bool = True) -> CrawlOutcome:
    """Crawl ``urls`` into ``out`` and say how it ended (``CrawlOutcome``).
    ``resumable``: with ``out/job`` as JOBDIR (the durable frontier), so that the
    same command after a kill goes on where it stopped, and the feed is appended to.

    A crawl did not do its job when it could not start (an exception: a store
    made with other settings, a store or JOBDIR in use), when it ended for a
    reason other than ``COMPLETE`` or ``STOPPED`` (its files could not be
    written, say), or when it fetched no page although it tried: every request
    failed (refused, timed out, no such host) or was answered with an HTTP
    error. A crawl that had nothing left to fetch (a finished crawl run again)
    did its job."""
    from scrapy.crawler import CrawlerProcess

    from ..config import NearDupConfig
    from ..counts import CrawlCounts
    from ..spiders.site import SiteSpider

    out.mkdir(parents=True, exist_ok=True)
    process = CrawlerProcess(crawl_settings(out, settings, resumable))
    crawler = process.create_crawler(SiteSpider)
    fetches = _Fetches(crawler)
    errors: list[BaseException] = []

    def could_not_run(failure: Any) -> None:  # (consumed here: said once, below, not as a traceback)
        errors.append(failure.value)

    process.crawl(crawler, start_url=list(urls), **spider_args).addErrback(could_not_run)
    process.start()
    reason = crawler.stats.get_value("finish_reason")
    counts = CrawlCounts.from_stats(crawler.stats.get_stats()) if NearDupConfig.of(crawler).enabled else None
    if errors:
        exc = errors[0]
        return CrawlOutcome(reason, f"the crawl could not run: {exc or type(exc).__name__}")
    if reason is None:
        return CrawlOutcome(reason, "the crawl did not finish (see the log above)")
    if reason in STOPPED:
        return CrawlOutcome(reason, stopped=True, counts=counts)
    if reason not in COMPLETE:
        return CrawlOutcome(reason, f"the crawl stopped early ({reason}; see the log above)")
    if fetches.pages == 0:
        stats = crawler.stats.get_stats()
        prefix = "downloader/exception_type_count/"
        failed = {name[len(prefix):].rsplit(".", 1)[-1]: n for name, n in stats.items()
                  if name.startswith(prefix) and not name.endswith("IgnoreRequest")}
        failed.update({f"HTTP {status}": n for status, n in sorted(fetches.error_statuses.items())})
        # (not failures of the site: the crawl's own rules left the start out)
        refused = {"forbidden by robots.txt": stats.get("robotstxt/forbidden", 0),
                   "off the site: a redirect or link to another host (stay_on_host, allow/deny)":
                       stats.get("offsite/filtered", 0)}
        refused = {why: n for why, n in refused.items() if n}
        if failed or refused:
            why = ", ".join(f"{name} x{n}" for name, n in {**failed, **refused}.items())
            hint = ": is the URL right and the site up?" if failed else ""
            return CrawlOutcome(reason, f"no page could be fetched from {', '.join(urls)} ({why}){hint}")
    return CrawlOutcome(reason, counts=counts)


def report(out: Path, counts: CrawlCounts | None) -> None:
    """What the crawl just run in this process did, in the counts and words of
    its summary line and stats (one definition each: ``crawler.counts``), and
    where its output is. The drops listed are this run's: the last lines of
    the duplicates file, which a resumed crawl appends to."""
    pages, dups = out / "pages.jsonl", out / "store" / "duplicates.jsonl"
    if counts is None:
        print(f"\nno counts (the near-duplicate filter did not run); the crawl's items -> {pages}")
        return
    records: list[dict] = []
    for line in dups.read_text(encoding="utf-8").splitlines() if dups.exists() else []:
        try:
            records.append(json.loads(line))
        except ValueError:  # a line a killed run left half-written
            pass
    dropped = [d for d in records if not d.get("avoided")]
    print(f"\n{counts.sentence()}")
    print(f"HTML pages kept and passed through unchecked -> {pages}")
    print(f"pages dropped as near-duplicates, and what each duplicates -> {dups}")
    for d in dropped[max(0, len(dropped) - counts.dropped):]:
        print(f"  {d['url']}\n    duplicates {d['duplicate_of']} (distance {d['distance']})")
    if counts.requests_avoided:
        print(f"the learned URL rules that avoided requests: neardup rules {out / 'store'}")
    print(f"search the index: neardup search {out / 'index.sqlite3'} WORDS")


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{flag} takes NAME=VALUE, got {v!r}")
        out[name.strip()] = value
    return out


def command(argv: list[str]) -> int:
    from ..config import ConfigError, NearDupConfig
    from ..spiders.site import SiteArguments, SpiderArgumentError, http_url_problem

    p = argparse.ArgumentParser(prog="neardup crawl", description="crawl sites with the near-duplicate filter")
    p.add_argument("urls", nargs="*", metavar="URL", help="start URLs (http:// or https://); none: the demo site")
    p.add_argument("--out", default=None, help="output directory (default ./out/crawl, or ./out/demo)")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a Scrapy or NEARDUP_* setting for the crawl (repeatable)")
    p.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a spider argument: {', '.join(SPIDER_ARGUMENTS)} (repeatable)")
    a = p.parse_args(argv)
    # Everything is checked before anything starts (the demo's server, the output
    # directory, Scrapy): a mistake is one line, not a traceback in a crawl log.
    try:
        settings, spider_args = _pairs(a.set, "-s"), _pairs(a.arg, "-a")
    except ValueError as exc:
        return fail("crawl", str(exc))
    if "start_url" in spider_args:
        return fail("crawl", "give the start URLs as arguments (neardup crawl URL ...), not as -a start_url")
    unknown = sorted(set(spider_args) - set(SPIDER_ARGUMENTS))
    if unknown:  # (a misspelt limit, max_page=1, would otherwise leave the crawl without one)
        return fail("crawl", f"-a {unknown[0]}: no such spider argument (one of {', '.join(SPIDER_ARGUMENTS)})")
    for url in a.urls:
        if (problem := http_url_problem(url)) is not None:
            return fail("crawl", problem)
    try:
        SiteArguments.parse(start_url=list(a.urls) or "http://127.0.0.1/",
                            **{k: v for k, v in spider_args.items() if k in SPIDER_ARGUMENTS})
    except SpiderArgumentError as exc:
        return fail("crawl", f"-a {exc}")
    out = Path(a.out or Path("out") / ("crawl" if a.urls else "demo"))
    try:
        NearDupConfig.from_settings(crawl_settings(out, settings, resumable=bool(a.urls)))
    except ConfigError as exc:
        return fail("crawl", f"-s {exc}")
    if out.exists() and not out.is_dir():
        return fail("crawl", f"--out {out} is a file, not a directory")
    if a.urls:
        outcome = crawl(a.urls, out, settings, spider_args)
    else:
        from ..demo_site import DemoSite

        if (problem := _clear_demo_outputs(out)) is not None:
            return fail("crawl", problem)
        with DemoSite().serve() as server:
            print(f"demo site serving on {server.url}", flush=True)
            outcome = crawl([server.url], out, {"AUTOTHROTTLE_ENABLED": "False", **settings}, spider_args,
                            resumable=False)
    if outcome.failure:
        fail("crawl", outcome.failure, outcome.exit_code)
        if a.urls and outcome.finish_reason not in (None, *COMPLETE):  # (it ran for a while)
            print(f"what it kept is in {out}; once the cause is fixed, the same command goes on where it stopped",
                  file=sys.stderr)
        return outcome.exit_code
    report(out, outcome.counts)
    if outcome.stopped:
        print(f"stopped before its end ({outcome.finish_reason})"
              + (": the same command goes on where it stopped" if a.urls else ""))
    elif a.urls:
        print(f"killed or stopped? the same command goes on where it stopped; to start over, remove {out}")
    return outcome.exit_code
