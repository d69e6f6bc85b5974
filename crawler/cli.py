"""``neardup``: the command line (also ``python -m scrapy_neardup``). ``USAGE``
lists the commands; ``neardup COMMAND --help`` tells more of each.

``crawl`` runs Scrapy in this process (``CrawlerProcess``) with the ready
spider (``scrapy_neardup.crawler.spiders.site``), both add-ons (the filter and
the polite profile) and no Scrapy project, from any directory. It writes kept
pages to ``DIR/pages.jsonl``, the full-text index to ``DIR/index.sqlite3``, the
fingerprint store to ``DIR/store`` (persistent: a second run skips what the
first kept) and every drop to ``DIR/store/duplicates.jsonl``. DIR defaults to
``./out/crawl`` (``./out/demo`` for the demo, which starts from nothing each
time). Its URLs, ``-s`` settings and ``-a`` spider arguments are checked
before anything starts; after the crawl it prints its report only if the
crawl did its job (``CrawlOutcome``).

``search`` and ``rules`` only read: they open their file read-only
(``sqlite_files``) and say so when it is not the kind of file they read.

Exit status, every command: 0 it did its job; 1 it ran but could not do it (a
crawl that could not run, stopped on an error or before its end, or fetched
no page; a search with no match; a file ``fingerprint`` could not read); 2 it
was asked wrongly (an unknown command, a bad argument, setting or query, a
file that is not what the command reads).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import Settings

    from .counts import CrawlCounts

USAGE = """\
usage: neardup COMMAND [ARGS]

  neardup crawl [URL ...] [--out DIR] [-s NAME=VALUE]... [-a NAME=VALUE]...
      crawl these sites with the near-duplicate filter; no URL: serve the demo site on 127.0.0.1 and crawl it
      -s NAME=VALUE  a Scrapy or NEARDUP_* setting (repeatable)
      -a NAME=VALUE  a spider argument: allow, deny, max_depth, max_pages, stay_on_host (repeatable)
  neardup search INDEX QUERY... [--limit N]
      search the index of kept pages; FTS5 syntax: words, "a phrase", prefix*, AND/OR/NOT, NEAR(a b), title:word
  neardup rules FILE|DIR|URL [--min-evidence N]
      the URL rules a crawl learned: its url_rules.sqlite3, a directory holding it (--out, the store,
      JOBDIR), or the shared store's redis:// URL
  neardup warmup                      compile the numba kernels now (else the first crawl does, off its thread)
  neardup fingerprint PATH... [--encoding ENC] [--min-tokens N]
                                      print the simhash of HTML files (.html.gz too)
  neardup distance HEX HEX            the Hamming distance of two fingerprints
  neardup scheme                      the fingerprint scheme's identity
  neardup --version                   the installed version

'neardup COMMAND --help' tells more. Exit status: 0 done; 1 could not be done (a crawl that failed or
fetched nothing, no match, an unreadable file); 2 asked wrongly (bad command, argument, setting, query
or file)."""

#: Finish reasons of a crawl that did its job: it ran out of pages, or hit a limit the user set.
COMPLETE = frozenset({"finished", "max_pages", "closespider_pagecount", "closespider_itemcount",
                      "closespider_timeout", "closespider_pagecount_no_item", "closespider_timeout_no_item"})
#: Finish reasons of a crawl stopped from outside (Ctrl-C, SIGTERM): the same command goes on.
STOPPED = frozenset({"shutdown"})
SPIDER_ARGUMENTS = ("allow", "deny", "max_depth", "max_pages", "stay_on_host")


def _fail(command: str, message: str, code: int = 2) -> int:
    """Say why ``neardup COMMAND`` did not do its job, in one line on stderr; return ``code``."""
    print(f"neardup {command}: {message}", file=sys.stderr)
    return code


def _whole(lo: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``lo``."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = lo - 1
        if number < lo:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {lo}, got {value!r}")
        return number
    return parse


# -- crawl ---------------------------------------------------------------------------

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

    from .config import NearDupConfig
    from .counts import CrawlCounts
    from .spiders.site import SiteSpider

    out.mkdir(parents=True, exist_ok=True)
    process = CrawlerProcess(crawl_settings(out, settings, resumable))
    crawler = process.create_crawler(SiteSpider)
    fetches = _Fetches(crawler)
    errors: list[BaseException] = []

    def could_not_run(failure: Any) -> None:  # (consumed here: said once, below, not as a traceback)
        errors.append(failure.value)

    process.crawl(crawler, start_url=",".join(urls), **spider_args).addErrback(could_not_run)
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
        prefix = "downloader/exception_type_count/"
        failed = {name[len(prefix):].rsplit(".", 1)[-1]: n for name, n in crawler.stats.get_stats().items()
                  if name.startswith(prefix) and not name.endswith("IgnoreRequest")}
        failed.update({f"HTTP {status}": n for status, n in sorted(fetches.error_statuses.items())})
        if failed:
            why = ", ".join(f"{name} x{n}" for name, n in failed.items())
            return CrawlOutcome(reason, f"no page could be fetched from {', '.join(urls)} ({why}): "
                                        "is the URL right and the site up?")
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
    print(f"pages kept and passed through unchecked -> {pages}")
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


def _cmd_crawl(argv: list[str]) -> int:
    from .config import ConfigError, NearDupConfig
    from .spiders.site import SiteArguments, SpiderArgumentError, http_url_problem

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
        return _fail("crawl", str(exc))
    if "start_url" in spider_args:
        return _fail("crawl", "give the start URLs as arguments (neardup crawl URL ...), not as -a start_url")
    for url in a.urls:
        if (problem := http_url_problem(url)) is not None:
            return _fail("crawl", problem)
    try:
        SiteArguments.parse(start_url=",".join(a.urls) or "http://127.0.0.1/",
                            **{k: v for k, v in spider_args.items() if k in SPIDER_ARGUMENTS})
    except SpiderArgumentError as exc:
        return _fail("crawl", f"-a {exc}")
    out = Path(a.out or Path("out") / ("crawl" if a.urls else "demo"))
    try:
        NearDupConfig.from_settings(crawl_settings(out, settings, resumable=bool(a.urls)))
    except ConfigError as exc:
        return _fail("crawl", f"-s {exc}")
    if out.exists() and not out.is_dir():
        return _fail("crawl", f"--out {out} is a file, not a directory")
    if a.urls:
        outcome = crawl(a.urls, out, settings, spider_args)
    else:
        from .demo_site import DemoSite

        shutil.rmtree(out, ignore_errors=True)  # the demo starts from nothing each time
        with DemoSite().serve() as server:
            print(f"demo site serving on {server.url}", flush=True)
            outcome = crawl([server.url], out, {"AUTOTHROTTLE_ENABLED": "False", **settings}, spider_args,
                            resumable=False)
    if outcome.failure:
        _fail("crawl", outcome.failure, outcome.exit_code)
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


# -- search ----------------------------------------------------------------------------

def search(index: str, query: str, limit: int) -> int:
    """Print the best matches of ``query`` in ``index``: 0 found, 1 no match
    ("no match" on stderr, stdout empty, as grep), 2 not an index or a bad query."""
    from .index import PageIndex, QueryError
    from .sqlite_files import WrongFileError

    try:
        idx = PageIndex(index, readonly=True)
    except WrongFileError as exc:
        return _fail("search", str(exc))
    try:
        rows = idx.search(query, limit)
    except QueryError as exc:
        return _fail("search", f"bad query {query!r}: {exc}")
    except sqlite3.DatabaseError as exc:  # (a damaged file)
        return _fail("search", f"{index} cannot be searched: {exc}")
    finally:
        idx.close()
    if not rows:
        return _fail("search", f"no match for {query!r} in {index}", 1)
    for url, title, score in rows:
        print(f"{score:8.3f}  {url}  {title}")
    return 0


def _cmd_search(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup search", description=(
        "search the index of kept pages (BM25 order). QUERY is FTS5 syntax: words (all must match), "
        '"a phrase", prefix*, AND / OR / NOT, NEAR(a b), title:word or body:word, parentheses. '
        "Exit status: 0 found, 1 no match, 2 not an index or a bad query."))
    p.add_argument("index", help="the index: DIR/index.sqlite3 of neardup crawl, or NEARDUP_INDEX")
    p.add_argument("query", nargs="+", help="the query (several arguments are joined with spaces)")
    p.add_argument("--limit", type=_whole(1), default=10, help="at most this many results (default 10)")
    a = p.parse_args(argv)
    return search(a.index, " ".join(a.query), a.limit)


# -- rules -----------------------------------------------------------------------------

def _rule_book(where: str) -> Path | str | None:
    """The rule book ``where`` names: a redis:// URL, a file, or the book in a
    directory a crawl wrote (--out, a store, a JOBDIR); None if there is none."""
    from scrapy_neardup.dedup.store.redis import is_redis_url

    if is_redis_url(where):
        return where
    path = Path(where)
    for candidate in (path, path / "url_rules.sqlite3", path / "store" / "url_rules.sqlite3",
                      path / "neardup" / "url_rules.sqlite3", path / "job" / "neardup" / "url_rules.sqlite3"):
        if candidate.is_file():
            return candidate
    return None


def rules(where: str, min_evidence: int | None) -> int:
    """List the rules of a rule book, read-only: 0 listed (none yet, too), 2 no book there."""
    from scrapy_neardup.dedup.store import StoreError

    from .sqlite_files import WrongFileError
    from .url_rules.book import list_rules

    location = _rule_book(where)
    if location is None:
        why = "no such file or directory" if not Path(where).exists() else \
            "not in it, its store/ or job/neardup/" if Path(where).is_dir() else "not a file"
        return _fail("rules", f"no URL rules at {where} (url_rules.sqlite3: {why})")
    try:
        listed = list_rules(location, min_evidence=min_evidence)
    except (WrongFileError, StoreError) as exc:  # (StoreError: redis:// without the redis package, or down)
        return _fail("rules", str(exc))
    except sqlite3.DatabaseError as exc:
        return _fail("rules", f"{location} cannot be read: {exc}")
    if not listed:
        print(f"neardup rules: no rules learned yet in {location}", file=sys.stderr)
    for r in listed:
        print(f"{r['state']:<9} {r['evidence']:>6} agree {r['counter_examples']:>3} against "
              f"{r['avoided']:>6} avoided  {r['rule']}")
        if r["counter_example"]:
            print(f"{'':>9} counter-example: {r['counter_example']}")
    return 0


def _cmd_rules(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup rules", description=(
        "the URL rules a crawl learned, each with its state (candidate, active, pinned, retired), the pairs "
        "that agree and disagree, and the requests it avoided; read-only"))
    p.add_argument("where", help="the rule book (url_rules.sqlite3, or the directory that holds it), "
                                 "or the shared store's redis:// URL")
    p.add_argument("--min-evidence", type=_whole(1), default=None,
                   help="agreeing pairs that make a rule active (default: the crawl's "
                        "NEARDUP_URL_RULES_MIN_EVIDENCE, as its book keeps it)")
    a = p.parse_args(argv)
    return rules(a.where, a.min_evidence)


# -- the command -----------------------------------------------------------------------

def _library(name: str) -> Callable[[list[str]], int]:
    """``neardup NAME ...``: the library's command (``scrapy_neardup.dedup.cli``)."""
    def command(argv: list[str]) -> int:
        from scrapy_neardup.dedup.cli import main as dedup_main

        return dedup_main([name, *argv], prog="neardup")
    return command


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "crawl": _cmd_crawl, "search": _cmd_search, "rules": _cmd_rules,
    **{name: _library(name) for name in ("warmup", "fingerprint", "distance", "scheme")},
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(f"neardup: give a command\n\n{USAGE}", file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if cmd in ("-V", "--version"):
        from scrapy_neardup import __version__

        print(f"neardup (scrapy-neardup) {__version__}")
        return 0
    command = COMMANDS.get(cmd)
    if command is None:
        print(f"neardup: unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        return command(rest)
    except BrokenPipeError:  # `neardup search ... | head`
        sys.stderr.close()  # (nothing more can be said; Python's exit flush must not complain)
        return 0
