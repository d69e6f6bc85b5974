"""Issue 27, sections 2 and 3: the index is the filter's, and a drop is recorded once.

* A user's spider in a new project (a ``CrawlSpider`` yielding ``{url, title}``,
  and one yielding no item at all), with the add-on: the index holds every page
  the filter let through, with the URL, title, visible text and language the
  filter extracted.
* Three runs on one ``NEARDUP_STORE``: the pages dropped in the first run are
  counted ``neardup/dropped_again`` in the next ones, and the duplicates file
  keeps one line each.
* An index made before the ``language`` column gains it when opened; the
  duplicates file loses a last line a kill cut short.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from scrapy.utils.test import get_crawler

from scrapy_neardup.crawler.filter.duplicates_log import DuplicatesLog
from scrapy_neardup.crawler.index import PageIndex, PageRow
from scrapy_neardup.dedup.fingerprint import DEFAULT_MIN_TOKENS
from scrapy_neardup.dedup.fingerprint.jobs import fingerprint_job
from tests.fixtures.http import PageServer
from tests.test_crawl import paths, read_jsonl, scrapy_crawl, site, stat  # noqa: F401 (site: a fixture)

SETTINGS = '''
BOT_NAME = "userproj"
SPIDER_MODULES = ["userproj.spiders"]
ADDONS = {"scrapy_neardup.NearDupAddon": 0}
CONCURRENT_REQUESTS = 1
'''

SPIDERS = '''
import scrapy
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class TitlesSpider(CrawlSpider):
    """As a new user writes one: items of their own, no text in them."""

    name = "titles"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def __init__(self, start="", **kwargs):
        self.start_urls = [start]
        super().__init__(**kwargs)

    def parse_item(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}


class LinksSpider(CrawlSpider):
    """Follows links and yields no item at all."""

    name = "links"
    rules = (Rule(LinkExtractor(), follow=True),)

    def __init__(self, start="", **kwargs):
        self.start_urls = [start]
        super().__init__(**kwargs)
'''


def user_project(root: Path) -> Path:
    """A project as ``scrapy startproject`` lays it out, with the add-on's one line."""
    (root / "userproj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = userproj.settings\n")
    (root / "userproj" / "__init__.py").write_text("")
    (root / "userproj" / "settings.py").write_text(SETTINGS)
    (root / "userproj" / "spiders" / "__init__.py").write_text("")
    (root / "userproj" / "spiders" / "pages.py").write_text(SPIDERS)
    return root


def user_crawl(project: Path, spider: str, url: str, *settings: str, feed: Path | None = None
               ) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", spider, "-a",
           f"start={url}", "-s", "LOG_LEVEL=INFO", "-s", "STATS_DUMP=True", *(("-o", str(feed)) if feed else ())]
    for s in settings:
        cmd += ["-s", s]
    return subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=300)


def check_index(index: Path, s, server, log: str) -> None:
    """The index holds every page the filter let through with the text it
    extracted (the kept pages and the too-short one), each once, with the
    title, text and language the filter's extraction gives."""
    db = sqlite3.connect(index)
    rows = {url: (title, text, language) for url, title, text, language in
            db.execute("SELECT url, title, text, language FROM pages")}
    assert paths(rows, server.url) == sorted(s.expected_kept() | {"/short.html"})
    # one write per page let through (a page fetched twice, unchanged the second time, is written twice)
    assert stat(log, "neardup/indexed") == sum(stat(log, f"neardup/{count}") or 0 for count in (
        "kept", "unchanged", "skipped/too_short"))
    assert f"index: {len(rows)} pages in {index}" in log
    for url, row in rows.items():
        path, _, query = url[len(server.url) - 1:].partition("?")
        _, _, body = s.page(path, {k: [v] for k, v in (p.split("=") for p in query.split("&") if p)})
        extracted = fingerprint_job(body, "utf-8", DEFAULT_MIN_TOKENS)
        assert row == (extracted.title, extracted.text, extracted.language), url
    assert all(text for _, text, _ in rows.values())
    assert {language for _, _, language in rows.values()} <= {"en", "und"}
    # the full-text search finds a page by a word of its text
    word = s.titles[4].split()[0]
    assert any(u.endswith("/articles/a4.html") for u, _, _ in PageIndex(index, readonly=True).search(word))


def test_a_user_spider_without_text_fills_the_index(site, tmp_path):
    s, server = site
    project = user_project(tmp_path / "proj")
    jobdir = tmp_path / "job"
    r = user_crawl(project, "titles", server.url, f"JOBDIR={jobdir}", feed=tmp_path / "items.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    check_index(jobdir / "neardup" / "index.sqlite3", s, server, r.stderr)
    # the user's items are theirs: nothing added to them
    items = read_jsonl(tmp_path / "items.jsonl")
    assert items and all(set(i) == {"url", "title"} for i in items)


def test_a_spider_that_yields_no_item_fills_the_index(site, tmp_path):
    s, server = site
    project = user_project(tmp_path / "proj")
    index = tmp_path / "index.sqlite3"
    r = user_crawl(project, "links", server.url, f"NEARDUP_INDEX={index}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert stat(r.stderr, "item_scraped_count") is None
    check_index(index, s, server, r.stderr)


def test_a_page_dropped_before_is_not_recorded_again(site, tmp_path):
    """Three runs on one store."""
    s, server = site
    store = tmp_path / "store"
    logs = []
    for run in "abc":
        r = scrapy_crawl(server.url, tmp_path / run, f"NEARDUP_STORE={store}")
        assert r.returncode == 0, r.stderr[-3000:]
        logs.append(r.stderr)
        dups = read_jsonl(store / "duplicates.jsonl")
        # one line per drop, whatever the number of runs
        assert sorted((d["url"][len(server.url) - 1:], d["duplicate_of"][len(server.url) - 1:]) for d in dups) \
            == sorted(s.expected_dropped().items())
    first, *later = logs
    assert stat(first, "neardup/dropped") == len(s.expected_dropped())
    assert stat(first, "neardup/dropped_again") is None
    assert "dropped again" not in first
    for log in later:
        assert stat(log, "neardup/dropped") is None
        assert stat(log, "neardup/dropped_again") == len(s.expected_dropped())
        assert stat(log, "neardup/unchanged") == len(s.expected_kept())
        assert f"{len(s.expected_dropped())} dropped again as known near-duplicates" in log
        # each page fetched has one verdict
        assert stat(log, "neardup/fetched") == sum(stat(log, f"neardup/{v}") or 0 for v in (
            "kept", "dropped", "dropped_again", "unchanged", "skipped"))
        # a page dropped again still drops its outlinks
        assert not s.never_requested() & set(server.requests)
    # the index (beside the store) holds each page once; unchanged pages were written again
    db = sqlite3.connect(store / "index.sqlite3")
    assert paths([u for (u,) in db.execute("SELECT url FROM pages")], server.url) == sorted(
        s.expected_kept() | {"/short.html"})


def test_no_index_says_nothing(site, tmp_path):
    """Without JOBDIR or a store the index is off: no warning about it on every run."""
    s, server = site
    r = user_crawl(user_project(tmp_path / "proj"), "links", server.url)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Disabled" not in r.stderr and "IndexPipeline" not in r.stderr and "index:" not in r.stderr
    assert "WARNING" not in r.stderr


def test_an_index_made_before_the_language_column_gains_it(tmp_path):
    path = tmp_path / "index.sqlite3"
    old = sqlite3.connect(path)  # the schema of the index before issue 27
    old.executescript("""
        CREATE TABLE pages (url TEXT PRIMARY KEY, title TEXT, text TEXT, fingerprint TEXT, fetched_at TEXT,
                            status INTEGER);
        CREATE VIRTUAL TABLE pages_fts USING fts5(url UNINDEXED, title, body, tokenize='unicode61');
        INSERT INTO pages VALUES ('http://t.test/old', 'Old', 'The harbour of Solpo.', '00', '2026-01-01', 200);
        INSERT INTO pages_fts VALUES ('http://t.test/old', 'old', 'the harbour of solpo');
        INSERT INTO pages VALUES ('http://t.test/el', 'El', 'εγκατάσταση', '02', '2026-01-01', 200);
        INSERT INTO pages_fts VALUES ('http://t.test/el', 'el', 'εγκατάσταση');
    """)
    old.close()
    # (searched as it was written: its Greek is not folded for search, so a query is not either)
    for readonly in (True, False):
        index = PageIndex(path, readonly=readonly)
        assert not index.folded and [u for u, _, _ in index.search("εγκατάσταση")] == ["http://t.test/el"]
        index.close()
    assert [u for u, _, _ in PageIndex(path, readonly=True).search("solpo")] == ["http://t.test/old"]
    index = PageIndex(path)
    index.add_many([PageRow("http://t.test/new", "New", "Solpo again.", "01", "2026-01-02", 200, "en")])
    rows = dict(index.db.execute("SELECT url, language FROM pages"))
    assert rows == {"http://t.test/old": None, "http://t.test/el": None, "http://t.test/new": "en"}
    assert sorted(u for u, _, _ in index.search("solpo")) == ["http://t.test/new", "http://t.test/old"]
    index.close()
    PageIndex(path).close()  # opened again: nothing more to add


def test_the_duplicates_file_records_a_drop_once(tmp_path):
    path = tmp_path / "duplicates.jsonl"
    log = DuplicatesLog(get_crawler(), str(path))
    assert not log.recorded("http://t.test/b", "http://t.test/a")
    log.dropped("http://t.test/b", "http://t.test/a", 1, 5, 4, None)
    log.avoided("http://t.test/c?x", "http://t.test/c", "rule", None)
    assert log.recorded("http://t.test/b", "http://t.test/a")
    log.close()
    with open(path, "a") as fh:  # a line a kill cut short
        fh.write('{"url": "http://t.test/d", "dupl')
    log = DuplicatesLog(get_crawler(), str(path))
    assert path.read_text().count("\n") == 2 and path.read_text().endswith("\n")
    assert log.recorded("http://t.test/b", "http://t.test/a")
    assert not log.recorded("http://t.test/b", "http://t.test/other")  # another twin: a new drop
    assert not log.recorded("http://t.test/c?x", "http://t.test/c")  # (an avoided request is no drop)
    assert not log.recorded("http://t.test/d", "http://t.test/a")
    log.close()
    assert not DuplicatesLog(get_crawler(), None).recorded("http://t.test/b", "http://t.test/a")


def test_a_crawlspiders_start_page_linked_again_gives_its_rules_items(tmp_path):
    """A ``CrawlSpider`` parses its start page with ``parse_start_url`` (no item), and the site's links back
    to it with a rule's callback, which gives the page's item. The second fetch was unchanged, its items
    held back, so the start page had no item with the filter, and one without it. A spider that parses both
    fetches with one callback still gets the page's item once."""
    from tests.fixtures import linked_back
    from tests.test_kill_resume import FOLLOW_SPIDER, feed_urls

    project = user_project(tmp_path / "proj")
    (project / "userproj" / "spiders" / "follow.py").write_text(FOLLOW_SPIDER)
    with linked_back.serve() as site:
        for spider in ("titles", "follow", "follow_parse"):
            feed = tmp_path / f"{spider}.jsonl"
            r = user_crawl(project, spider, f"{site.url}/index.html", feed=feed)
            assert r.returncode == 0 and "'neardup/unchanged': 1" in r.stderr, r.stderr[-3000:]
            assert sorted(feed_urls(feed)) == site.urls(), spider


#: A callback that fails on one URL of a pair of near-copies, and one that waits for a request it yielded
CALLBACK_SPIDERS = '''
import asyncio
import json

import scrapy


class FailingSpider(scrapy.Spider):
    """Its callback raises on the tracking copy of an article (fetched first), not on the article."""

    name = "failing"
    custom_settings = {"CONCURRENT_REQUESTS": 1}

    def __init__(self, start="", order="tracking first", **kwargs):
        self.base = start
        self.order = order
        super().__init__(**kwargs)

    async def start(self):
        urls = [self.base + "a.html?utm=1", self.base + "a.html"]
        for url in urls if self.order == "tracking first" else urls[::-1]:
            yield scrapy.Request(url, dont_filter=True)
            await asyncio.sleep(1)

    def parse(self, response):
        if "utm" in response.url:
            raise ValueError("cannot parse a tracking copy")
        yield {"url": response.url}


class ApiSpider(scrapy.Spider):
    """Starts at the site's API (JSON: a page that passes unchecked)."""

    def __init__(self, start="", **kwargs):
        self.start_urls = [start + "api.json"]
        self.base = start
        super().__init__(**kwargs)


class WaitingSpider(ApiSpider):
    """An API's callback that yields a request and awaits what it brings."""

    name = "waiting"
    came = asyncio.Event()

    async def parse(self, response):
        yield scrapy.Request(self.base + "a.html", callback=self.parse_page)
        await asyncio.wait_for(self.came.wait(), 20)
        yield {"url": response.url, "pages": json.loads(response.text)["pages"]}

    def parse_page(self, response):
        self.came.set()
        yield {"url": response.url}


class AgainSpider(ApiSpider):
    """Requests a page again itself (``dont_filter``) for another callback."""

    name = "again"

    def parse(self, response):
        yield scrapy.Request(self.base + "a.html", callback=self.parse_page)

    def parse_page(self, response):
        yield {"url": response.url}
        yield response.request.replace(callback=self.parse_comments, dont_filter=True)

    def parse_comments(self, response):
        yield {"comments_of": response.url}
'''


def _callback_site(target: str) -> tuple[int, dict[str, str], bytes]:
    if target.startswith("/api.json"):
        return 200, {"Content-Type": "application/json"}, b'{"pages": 1}'
    if target.startswith("/a.html"):
        text = " ".join(f"{w}{i}" for i, w in enumerate(["harbour", "lantern", "meadow", "copper"] * 40))
        ad = "tracking banner" if "utm" in target else "plain banner"
        return 200, {"Content-Type": "text/html; charset=utf-8"}, \
            f"<html><head><title>A</title></head><body><p>{text}</p><div>{ad}</div></body></html>".encode()
    return 404, {}, b""


def _callback_crawl(tmp_path: Path, spider: str, *args: str) -> tuple[subprocess.CompletedProcess, list[dict], str]:
    """A crawl of the callbacks' site (``_callback_site``) by ``spider`` of ``CALLBACK_SPIDERS`` in a new
    project (``args``: its ``-a`` arguments): the run, its items, and the site's URL."""
    project = tmp_path / "proj"
    if not project.exists():
        user_project(project)
        (project / "userproj" / "spiders" / "callbacks.py").write_text(CALLBACK_SPIDERS)
    feed = tmp_path / f"items-{len(list(tmp_path.glob('items-*')))}.jsonl"
    with PageServer(_callback_site) as server:
        base = server.url + "/"
        cmd = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"start={base}",
               *(x for arg in args for x in ("-a", arg)), "-o", str(feed), "-s", "LOG_LEVEL=INFO",
               "-s", "STATS_DUMP=True"]
        r = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else [], base


def test_a_page_whose_callback_raises_is_not_stored_and_its_near_copy_keeps_its_items(tmp_path):
    """The callback raised on the first of two near-copies: that page was stored all the same, so the second,
    whose callback works, was dropped as its duplicate, and the article had no item at all. A new page whose
    callback raises is now not stored, and passes unchecked (``neardup/skipped/callback_error``), as without
    the filter; one that is a near-copy of a kept page is dropped as before."""
    r, items, base = _callback_crawl(tmp_path, "failing")
    assert "cannot parse a tracking copy" in r.stderr
    assert [item["url"] for item in items] == [f"{base}a.html"]
    assert stat(r.stderr, "neardup/skipped/callback_error") == 1 and stat(r.stderr, "neardup/dropped") is None
    assert stat(r.stderr, "neardup/kept") == 1
    # the other way round, the page whose callback raises is a near-copy of a kept page: checked, and dropped
    # as any (its outlinks with it), not passed unchecked
    r, items, base = _callback_crawl(tmp_path, "failing", "order=article first")
    assert [item["url"] for item in items] == [f"{base}a.html"]
    assert stat(r.stderr, "neardup/dropped") == 1 and stat(r.stderr, "neardup/skipped/callback_error") is None


def test_an_unchecked_pages_output_leaves_as_the_callback_yields_it(tmp_path):
    """A JSON page passes unchecked: nothing waits for a verdict, so its callback's output leaves as it is
    yielded, as without the filter. Held until the callback ended, a callback that awaits the page a
    request it yielded brings waited for ever (here: timed out, its item lost)."""
    r, items, base = _callback_crawl(tmp_path, "waiting")
    assert "TimeoutError" not in r.stderr
    assert sorted(item["url"] for item in items) == [f"{base}a.html", f"{base}api.json"]
    assert stat(r.stderr, "neardup/skipped/non_html") == 1


def test_items_held_back_from_a_page_the_spider_requests_again_are_said_once(tmp_path):
    """A page the spider requests again itself (``dont_filter``, another callback) is unchanged, and its
    items are held back, as ``NEARDUP_EMIT_UNCHANGED`` says: an INFO line now says so, once, naming the
    way out (``neardup_skip``); before, nothing in the log did."""
    r, items, base = _callback_crawl(tmp_path, "again")
    assert items == [{"url": f"{base}a.html"}]
    assert r.stderr.count(f"{base}a.html, requested again (dont_filter), is unchanged: its items are held "
                          "back") == 1


def test_no_word_of_held_items_for_start_requests_made_again(tmp_path):
    """A crawl of a store that has the start page (here: the same crawl run twice on one store) makes its start
    request again, ``dont_filter``, and its items are held back as an unchanged page's: that is what an
    earlier crawl emitted, not the spider's own request again, so the INFO line is not said."""
    from tests.fixtures import linked_back
    from tests.test_kill_resume import FOLLOW_SPIDER

    project = user_project(tmp_path / "proj")
    (project / "userproj" / "spiders" / "follow.py").write_text(FOLLOW_SPIDER)

    with linked_back.serve() as site:
        for run in ("a", "b"):
            r = user_crawl(project, "follow", f"{site.url}/index.html", f"NEARDUP_STORE={tmp_path / 'store'}")
            assert r.returncode == 0, r.stderr[-3000:]
        assert "'neardup/unchanged'" in r.stderr and "is unchanged: its items are held back" not in r.stderr

