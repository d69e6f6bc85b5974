"""Real `scrapy crawl` runs against the generated demo site on a real 127.0.0.1 server."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from w3lib.encoding import html_body_declared_encoding

from scrapy_neardup.crawler.demo_site import DemoServer, DemoSite
from scrapy_neardup.dedup import Fingerprinter
from tests.conftest import ROOT, SHARED
from tests.fixtures.http import PageServer
from tests.fixtures.pages import LEGACY_ENCODINGS, PARAGRAPHS, legacy_page


def scrapy_crawl(url: str, out: Path, *settings: str, args: tuple[str, ...] = (),
                 log: Path | None = None) -> subprocess.CompletedProcess:
    """Crawl ``url`` with the ready spider into ``out``; ``log``: its log goes there as it is
    written (for a site that waits for a line of it: ``wait_for_line``), and into ``stderr``."""
    cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", "site",
           "-a", f"start_url={url}", *args, "-O", str(out / "pages.jsonl"),
           "-s", "CONCURRENT_REQUESTS=1", "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "LOG_LEVEL=DEBUG",
           "-s", "STATS_DUMP=True"]
    for s in settings:
        cmd += ["-s", s]
    if log is None:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    with open(log, "w") as err:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, timeout=300)
    r.stderr = log.read_text()
    return r


#: What a crawl's log says once its worker process is up (``crawler.filter.workers``)
WORKER_UP = "near-duplicate filter: the worker process is up"


def wait_for_line(log: Path, text: str, patience: float = 120) -> bool:
    """Wait until the log being written at ``log`` has ``text`` (for a site's answer that must
    come after it: no sleep guesses how long the crawl takes to get there), or ``patience``
    seconds have passed; whether it has."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return True
        time.sleep(0.05)
    return False


def demo_site_after_the_worker(site: DemoSite, log: Path) -> PageServer:
    """``site`` on loopback, its front page answered at once and every other page once the crawl's
    log at ``log`` says the worker is up: so that the worker serves those pages however long a busy
    machine takes to start it (no fixed duration)."""
    def respond(target: str) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(target)
        status, ctype, body = site.page(parts.path, parse_qs(parts.query))
        return status, {"Content-Type": ctype}, body

    def after_the_worker(target: str) -> float:
        if target != "/":
            wait_for_line(log, WORKER_UP)
        return 0.0

    return PageServer(respond, after_the_worker)


def paths(urls, base: str) -> list[str]:
    return sorted(u[len(base) - 1 :] for u in urls)


@pytest.fixture()
def site():
    s = DemoSite()
    with s.serve() as server:
        yield s, server


def read_jsonl(p: Path) -> list[dict]:
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def stat(log: str, name: str) -> int | None:
    for line in log.splitlines():
        if f"'{name}':" in line:
            return int(line.split(":")[-1].strip(" ,}"))
    return None


def test_crawl_drops_planted_duplicates_and_their_outlinks(site, tmp_path):
    s, server = site
    store = tmp_path / "store"
    r = scrapy_crawl(server.url, tmp_path, f"NEARDUP_STORE={store}", f"NEARDUP_INDEX={tmp_path / 'index.sqlite3'}")
    assert r.returncode == 0, r.stderr[-3000:]
    log = r.stderr
    items = read_jsonl(tmp_path / "pages.jsonl")
    # a too-short page passes through unfingerprinted
    assert paths([i["url"] for i in items], server.url) == sorted(s.expected_kept() | {"/short.html"})
    assert all(i["text"] and i["status"] == 200 for i in items)
    assert all(len(i["fingerprint"]) == 16 for i in items if not i["url"].endswith("/short.html"))
    assert [i["fingerprint"] for i in items if i["url"].endswith("/short.html")] == [None]
    dups = read_jsonl(store / "duplicates.jsonl")
    got = {d["url"][len(server.url) - 1 :]: d["duplicate_of"][len(server.url) - 1 :] for d in dups}
    assert got == s.expected_dropped()
    assert all(set(d) >= {"id", "url", "duplicate_of", "distance", "fingerprint", "referer", "time"} for d in dups)
    assert all(d["referer"] and d["id"] == d["url"] for d in dups)  # one schema with neardup dedup's
    # no outlink of a dropped page was requested, and pages linked from both are fetched once
    requested = server.requests
    assert not s.never_requested() & set(requested)
    assert requested.count("/articles/a5.html") == 1
    assert stat(log, "neardup/dropped") == 5
    assert stat(log, "neardup/kept") == len(s.expected_kept())
    assert sum(stat(log, f"neardup/distance_count/{d}") or 0 for d in range(4)) == 5
    assert {d["distance"] for d in dups} <= {0, 1, 2, 3}
    assert stat(log, "neardup/skipped/non_html") == 1
    assert stat(log, "neardup/skipped/too_short") == 1
    assert stat(log, "neardup/skipped") == 2  # passed through unchecked, whatever the reason
    assert stat(log, "neardup/fetched") == len(s.expected_kept()) + 5 + 2  # one verdict each
    assert stat(log, "neardup/outlinks_dropped") >= 5
    assert "near-duplicate dropped:" in log and "neardup summary:" in log
    # the filter's start-up objects (numba, the kernels, the tables) are kept out of full
    # garbage collections, which would walk them again every ~100 responses (``long_lived``)
    frozen = [int(n) for n in re.findall(r"near-duplicate filter: (\d+) long-lived objects left out", log)]
    assert frozen and frozen[0] > 20_000, frozen
    # what the filter writes is the user's only: the store, the drops, the index
    for written in (store / "store.sqlite3", store / "duplicates.jsonl", tmp_path / "index.sqlite3"):
        assert written.stat().st_mode & 0o077 == 0, written
    # the index holds the kept pages and finds them
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    indexed = [u for (u,) in db.execute("SELECT url FROM pages")]
    assert paths(indexed, server.url) == sorted(s.expected_kept() | {"/short.html"})
    word = s.titles[4].split()[0]
    out = subprocess.run([sys.executable, "-m", "scrapy_neardup", "search", str(tmp_path / "index.sqlite3"), word],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "/articles/a4.html" in out.stdout


def test_second_run_with_same_store_admits_nothing_twice(site, tmp_path):
    s, server = site
    store = tmp_path / "store"
    assert scrapy_crawl(server.url, tmp_path / "a", f"NEARDUP_STORE={store}").returncode == 0
    r = scrapy_crawl(server.url, tmp_path / "b", f"NEARDUP_STORE={store}")
    assert r.returncode == 0
    # unchanged pages are not re-emitted; only the unfingerprinted short page passes again
    assert [i["url"][len(server.url) - 1 :] for i in read_jsonl(tmp_path / "b" / "pages.jsonl")] == ["/short.html"]
    # (the spider's start requests are filtered like links: "/" is fetched once)
    assert stat(r.stderr, "neardup/unchanged") == len(s.expected_kept())
    assert stat(r.stderr, "neardup/kept") is None


def test_resume_with_jobdir(site, tmp_path):
    s, server = site
    jobdir = tmp_path / "job"
    r1 = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={jobdir}", args=("-a", "max_pages=6"))
    assert r1.returncode == 0, r1.stderr[-2000:]
    assert (jobdir / "neardup" / "store.sqlite3").exists()
    r2 = scrapy_crawl(server.url, tmp_path / "b", f"JOBDIR={jobdir}")
    assert r2.returncode == 0, r2.stderr[-2000:]
    urls = [i["url"] for i in read_jsonl(tmp_path / "a" / "pages.jsonl") + read_jsonl(tmp_path / "b" / "pages.jsonl")]
    assert set(paths(urls, server.url)) == s.expected_kept() | {"/short.html"}
    # The page that hit max_pages (and any other in flight then) is fetched again on
    # resume, with the links it never yielded; its item, if the first run's feed got it,
    # was cut from that file when the frontier opened again: each page once across the
    # feeds (crawler.frontier.feeds), and once in the index.
    assert len(urls) == len(set(urls)), sorted(urls)
    index = sqlite3.connect(jobdir / "neardup" / "index.sqlite3")
    indexed = [u for (u,) in index.execute("SELECT url FROM pages_fts")]
    assert sorted(indexed) == sorted(set(urls))
    dups = read_jsonl(jobdir / "neardup" / "duplicates.jsonl")
    # (the durable frontier queues what it marks seen in one transaction: every
    # planted duplicate is fetched, in one run or the other, and dropped)
    assert {d["url"][len(server.url) - 1 :] for d in dups} == set(s.expected_dropped())


def test_a_jobdir_without_the_durable_frontier_emits_a_page_fetched_again(site, tmp_path):
    """With the project's own scheduler (here NEARDUP_FRONTIER=False), nothing says which pages had their
    items committed before a kill, and the store in JOBDIR remembers them all: a page fetched again
    after a resume is emitted again, not taken for unchanged (which lost 12-16 pages' items of a 60-page
    site killed once)."""
    s, server = site
    jobdir = tmp_path / "job"
    r1 = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={jobdir}", "NEARDUP_FRONTIER=False")
    assert r1.returncode == 0, r1.stderr[-2000:]
    assert "JOBDIR without the durable frontier" in r1.stderr
    # every page fetched again in the same JOBDIR, as the pages Scrapy's own queue hands out again after a
    # kill are (its seen set forgotten, so that this run fetches them all)
    (jobdir / "requests.seen").unlink()
    r2 = scrapy_crawl(server.url, tmp_path / "b", f"JOBDIR={jobdir}", "NEARDUP_FRONTIER=False")
    assert r2.returncode == 0, r2.stderr[-2000:]
    again = paths([i["url"] for i in read_jsonl(tmp_path / "b" / "pages.jsonl")], server.url)
    assert set(again) == s.expected_kept() | {"/short.html"}
    assert stat(r2.stderr, "neardup/kept_again") == len(s.expected_kept())
    assert stat(r2.stderr, "neardup/unchanged") is None


def test_an_addon_loaded_after_the_filters_with_its_own_scheduler_leaves_a_jobdir_crawl_whole(site, tmp_path):
    """An add-on after the filter's sets ``SCHEDULER``: the durable frontier's dupe filter, set by the filter,
    had no file then and raised at every request: the crawl "finished" after its first page. Scrapy's own
    dupe filter now takes its place, and the crawl is the one with the project's own scheduler."""
    s, server = site
    addons = json.dumps({"scrapy_neardup.NearDupAddon": 0, "tests.fixtures.scheduler_addon.OwnSchedulerAddon": 10})
    r = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={tmp_path / 'job'}", f"ADDONS={addons}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "JOBDIR without the durable frontier (SCHEDULER tests.fixtures.scheduler_addon.OwnScheduler" in r.stderr
    assert "RFPDupeFilter takes its place" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    urls = paths([i["url"] for i in read_jsonl(tmp_path / "a" / "pages.jsonl")], server.url)
    assert set(urls) == s.expected_kept() | {"/short.html"} and len(urls) == len(set(urls))
    assert (tmp_path / "job" / "requests.seen").exists()  # (Scrapy's seen set, in JOBDIR as without the filter)


@pytest.mark.parametrize("command", ["shell", "fetch"])
def test_commands_that_look_at_a_page_leave_the_crawls_files_alone(site, tmp_path, command):
    """With JOBDIR in a project's settings, ``scrapy fetch`` and ``scrapy shell`` wrote the page they
    looked at into the crawl's store, index and frontier: the next crawl counted it "unchanged" and
    emitted no item for it. The filter stays out of such commands; they run as without it. (``scrapy
    shell`` is run without JOBDIR: with one, Scrapy's own disk queue cannot take the shell's request,
    and the shell waits for ever, with or without the add-on.)"""
    s, server = site
    jobdir = tmp_path / "job"
    args = ["-c", "response.status"] if command == "shell" else ["-s", f"JOBDIR={jobdir}"]
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", command,
                        f"{server.url}about.html", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"neardup: off for `scrapy {command}`" in r.stderr, r.stderr[-2000:]
    assert "near-duplicate filter on" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    if command == "shell":
        assert r.stdout.strip().endswith("200")
        return
    ours = [p.name for p in jobdir.iterdir()] if jobdir.exists() else []
    assert not [n for n in ours if n.startswith(("frontier", "neardup"))], ours
    # the crawl then keeps that page as any other
    r = scrapy_crawl(server.url, tmp_path / "crawl", f"JOBDIR={jobdir}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{server.url}about.html" in [i["url"] for i in read_jsonl(tmp_path / "crawl" / "pages.jsonl")]


def test_the_ready_spider_takes_a_linked_json_or_text_answer_without_an_error(tmp_path):
    """A LinkExtractor raised on a JSON answer (``AttributeError: 'dict' object has no attribute 'iter'``)."""

    class Site:
        def page(self, path: str, query: dict) -> tuple[int, str, bytes]:
            if path == "/":
                return 200, "text/html", b"<p>" + b"a front page of words " * 10 + b"</p><a href='/d.json'>d</a> " \
                    b"<a href='/t.txt'>t</a>"
            if path == "/d.json":
                return 200, "application/json", b'{"a": [1, 2], "href": "/x"}'
            if path == "/t.txt":
                return 200, "text/plain", b"plain text with a /y.html path in it " * 10
            return 404, "text/plain", b"not found"

    with DemoServer(Site()) as server:  # type: ignore[arg-type]
        r = scrapy_crawl(server.url, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "spider_exceptions" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert stat(r.stderr, "response_received_count") == 4  # robots.txt, /, /d.json, /t.txt


def test_bad_setting_stops_the_crawl_naming_it(tmp_path):
    r = scrapy_crawl("http://127.0.0.1:9/", tmp_path, "NEARDUP_MAX_DISTANCE=nine")
    assert r.returncode != 0
    assert "NEARDUP_MAX_DISTANCE must be an integer" in r.stderr


def test_disabled_filter_keeps_everything(site, tmp_path):
    s, server = site
    r = scrapy_crawl(server.url, tmp_path, "NEARDUP_ENABLED=False")
    assert r.returncode == 0
    assert stat(r.stderr, "neardup/dropped") is None
    assert "/only-from-mirror.html" in server.requests
    items = read_jsonl(tmp_path / "pages.jsonl")
    assert items and all(i["text"] and i["fingerprint"] is None for i in items)  # the spider extracts itself


def test_in_thread_fingerprinting_gives_the_same_result(site, tmp_path):
    s, server = site
    r = scrapy_crawl(server.url, tmp_path, "NEARDUP_WORKERS=0", f"NEARDUP_STORE={tmp_path / 'store'}")
    assert r.returncode == 0, r.stderr[-2000:]
    dups = read_jsonl(tmp_path / "store" / "duplicates.jsonl")
    assert {d["url"][len(server.url) - 1 :] for d in dups} == set(s.expected_dropped())
    assert "0 worker process" in r.stderr


class LegacyEncodingSite:
    """Pages in legacy encodings, served as ``text/html`` with no charset and
    none in the page: each language in UTF-8 and in its legacy encodings, and
    the real undeclared pages of zh-cwced when ../shared is there."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        for lang in PARAGRAPHS:
            self.pages[f"/{lang}/utf-8.html"] = legacy_page(lang).encode("utf-8")
        for lang, codec in LEGACY_ENCODINGS:
            self.pages[f"/{lang}/{codec}.html"] = legacy_page(lang).encode(codec)
        if (SHARED / "zh-cwced").exists():
            for p in sorted((SHARED / "zh-cwced" / "original").glob("*.html")):
                body = p.read_bytes()
                if not html_body_declared_encoding(body):
                    self.pages[f"/zh-cwced/{p.name}"] = body
        # a PDF that the server calls a page: not fingerprinted, counted
        self.pages["/report"] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n" * 40

    def page(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a> ' for p in self.pages)
            return 200, "text/html", f"<html><body>{links}</body></html>".encode()
        if path in self.pages:
            return 200, "text/html", self.pages[path]
        return 404, "text/plain", b"not found"


def test_undeclared_encodings_fingerprint_as_the_library_does(tmp_path):
    """A crawl must not use Scrapy's guess for an undeclared page (it reads
    one real GBK page of zh-cwced as Cyrillic): each kept page's fingerprint is
    the library's for the same bytes, and the same text in another encoding is
    an exact duplicate of the UTF-8 page."""
    site = LegacyEncodingSite()
    with DemoServer(site) as server:  # type: ignore[arg-type]
        store = tmp_path / "store"
        r = scrapy_crawl(server.url, tmp_path, f"NEARDUP_STORE={store}")
    assert r.returncode == 0, r.stderr[-3000:]
    fper = Fingerprinter()
    items = {i["url"][len(server.url) - 1 :]: i for i in read_jsonl(tmp_path / "pages.jsonl")}
    assert set(items) == {"/", "/report", *(f"/{lang}/utf-8.html" for lang in PARAGRAPHS),
                          *(p for p in site.pages if p.startswith("/zh-cwced/"))}
    assert items["/report"]["fingerprint"] is None and stat(r.stderr, "neardup/skipped/binary") == 1
    for path, item in items.items():
        if path not in ("/", "/report"):
            assert item["fingerprint"] == fper.fingerprint_html(site.pages[path]).hex, path
    dups = {d["url"][len(server.url) - 1 :]: d for d in read_jsonl(store / "duplicates.jsonl")}
    assert set(dups) == {f"/{lang}/{codec}.html" for lang, codec in LEGACY_ENCODINGS}
    for path, d in dups.items():
        assert d["distance"] == 0 and d["duplicate_of"].endswith(path.rsplit("/", 1)[0] + "/utf-8.html"), d


@pytest.mark.parametrize("scope, dropped", [("all", 1), ("host", 0), ("domain", 0)])
def test_scope_limits_comparison_to_the_same_host(site, tmp_path, scope, dropped):
    """Store poisoning: a copy on another host (here localhost vs 127.0.0.1) is no
    duplicate under NEARDUP_SCOPE=host or domain (an IP address is its own domain)."""
    s, server = site
    other = server.url.replace("127.0.0.1", "localhost")
    r = scrapy_crawl(f"{server.url}about.html,{other}about.html", tmp_path, f"NEARDUP_SCOPE={scope}",
                     "DEPTH_LIMIT=0", args=("-a", "max_depth=0"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (stat(r.stderr, "neardup/dropped") or 0) == dropped
    assert (stat(r.stderr, "neardup/kept") or 0) == 2 - dropped


class TranslatedSite:
    """One weather report in seven languages (``PARAGRAPHS``, zh-hant aside),
    each page with the same long command listing, and the French report under
    the Korean path with a note that its translation is on the way."""

    LISTING = "\n".join(f"$ sudo apt-get install --no-install-recommends pkg{i % 7}-dev && make -C /usr/src/pkg{i % 7}"
                        for i in range(40))

    def __init__(self) -> None:
        self.langs = [lang for lang in PARAGRAPHS if lang != "zh-hant"]
        self.pages = {f"/{lang}/weather.html": self._page(PARAGRAPHS[lang]) for lang in self.langs}
        self.pages["/ko/weather-untranslated.html"] = self._page(PARAGRAPHS["fr"], "<p>번역 중</p>")

    def _page(self, text: str, note: str = "") -> bytes:
        return (f"<html><head><meta charset=utf-8><title>Weather</title></head><body><h1>Weather</h1>{note}"
                + f"<p>{text}</p>" * 3 + f"<pre>{self.LISTING}</pre></body></html>").encode()

    def page(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a> ' for p in self.pages)
            return 200, "text/html", f"<html><body>{links}</body></html>".encode()
        return (200, "text/html", self.pages[path]) if path in self.pages else (404, "text/plain", b"not found")


def test_pages_in_two_languages_sharing_a_listing_are_both_kept(tmp_path):
    """Issue 17: a long listing two pages share does not make them duplicates
    across languages (weighed as prose and without the language, it puts ru
    and ar 3 bits apart); an untranslated page under another language's path
    is still a duplicate of its original."""
    site = TranslatedSite()
    with DemoServer(site) as server:  # type: ignore[arg-type]
        store = tmp_path / "store"
        r = scrapy_crawl(server.url, tmp_path, f"NEARDUP_STORE={store}")
    assert r.returncode == 0, r.stderr[-3000:]
    items = read_jsonl(tmp_path / "pages.jsonl")
    kept = paths([i["url"] for i in items], server.url)
    assert kept == sorted(["/", *(f"/{lang}/weather.html" for lang in site.langs)])
    languages = {i["url"][len(server.url) - 1:]: i["language"] for i in items}
    assert all(languages[f"/{lang}/weather.html"] == lang.split("-")[0] for lang in site.langs), languages
    dups = read_jsonl(store / "duplicates.jsonl")
    assert [(d["url"][len(server.url) - 1:], d["duplicate_of"][len(server.url) - 1:]) for d in dups] == [
        ("/ko/weather-untranslated.html", "/fr/weather.html")]


COUNT_WORDS = ("pages fetched", "kept", "dropped as near-duplicates", "unchanged", "passed through unchecked",
               "outlinks not requested", "requests avoided by learned URL rules", "bytes downloaded")


def counts_said(line: str) -> dict[str, int]:
    """``{words: count}`` of a line that says the crawl's counts."""
    said = {}
    for part in line.split(", "):
        number, _, words = part.partition(" ")
        said[words] = int(number)
    assert tuple(said) == COUNT_WORDS, line
    return said


def test_neardup_crawl_says_the_counts_of_its_stats(tmp_path):
    """Issue 24: one definition of each count. ``neardup crawl`` of the demo
    prints the counts the summary line says and the stats hold; pages fetched
    leaves robots.txt out; the too-short page is passed through unchecked, not kept."""
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "crawl", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    log = r.stderr
    printed = counts_said(next(line for line in r.stdout.splitlines() if line.endswith("bytes downloaded")))
    summary = counts_said(next(line for line in log.splitlines() if "neardup summary: " in line)
                          .split("neardup summary: ")[1])
    assert printed == summary
    stats = {words: stat(log, name) or 0 for words, name in (
        ("pages fetched", "neardup/fetched"), ("kept", "neardup/kept"), ("dropped as near-duplicates", "neardup/dropped"),
        ("unchanged", "neardup/unchanged"), ("passed through unchecked", "neardup/skipped"),
        ("outlinks not requested", "neardup/outlinks_dropped"),
        ("requests avoided by learned URL rules", "neardup/requests_avoided"),
        ("bytes downloaded", "downloader/response_bytes"))}
    assert printed == stats
    demo = DemoSite()
    assert stat(log, "robotstxt/response_count") == 1
    assert printed["pages fetched"] == stat(log, "response_received_count") - 1
    assert printed["kept"] == len(demo.expected_kept())
    assert printed["dropped as near-duplicates"] == len(demo.expected_dropped())
    assert printed["passed through unchecked"] == 2 == stat(log, "neardup/skipped/too_short") + stat(
        log, "neardup/skipped/non_html")
    # every page fetched has one verdict
    assert printed["pages fetched"] == sum(printed[w] for w in COUNT_WORDS[1:5])
    # the feed holds the kept pages and the too-short one (the non-HTML one makes no item)
    assert len(read_jsonl(out / "pages.jsonl")) == printed["kept"] + 1
    listed = [line.strip() for line in r.stdout.splitlines() if line.startswith("    duplicates ")]
    assert len(listed) == printed["dropped as near-duplicates"]


def test_the_ready_spider_does_not_parse_a_page_past_the_size_the_filter_checks(site, tmp_path):
    """A page past ``NEARDUP_MAX_PAGE_BYTES`` passes unchecked, and the ready spider does not parse it in the
    crawl's thread either (the filter says why, ``too_costly_to_parse``, while the callback runs)."""
    s, server = site
    r = scrapy_crawl(server.url, tmp_path / "a", "NEARDUP_MAX_PAGE_BYTES=1500")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (stat(r.stderr, "neardup/skipped/too_large") or 0) > 0, r.stderr[-3000:]
    assert "is not parsed for its links or text: past NEARDUP_MAX_PAGE_BYTES" in r.stderr


def test_a_resume_refuses_a_store_that_lost_fingerprints(site, tmp_path):
    """The store of a JOBDIR replaced, restored from an older copy, or left without its ``-wal`` file: the
    resume kept the near-copies of every page the store had lost, and never fetched those pages again. The
    frontier records the store's size at each commit, and a resume refuses a store that holds fewer."""
    s, server = site
    jobdir = tmp_path / "job"
    r = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={jobdir}", args=("-a", "max_pages=6"))
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm"):
        (jobdir / "neardup" / name).unlink(missing_ok=True)
    r = scrapy_crawl(server.url, tmp_path / "b", f"JOBDIR={jobdir}")
    assert r.returncode != 0
    assert re.search(r"the store \S+ holds 0 fingerprints, and the frontier in \S+ recorded \d+ committed there",
                     r.stderr), r.stderr[-2000:]
    assert not (tmp_path / "b" / "pages.jsonl").exists() or not read_jsonl(tmp_path / "b" / "pages.jsonl")


def test_a_resume_says_its_index_was_removed(site, tmp_path):
    """The index of a JOBDIR removed between runs: the resume made a new one without the pages kept before
    (done for the frontier, never fetched again), and said nothing. It now says so."""
    s, server = site
    jobdir = tmp_path / "job"
    r = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={jobdir}", args=("-a", "max_pages=6"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "is new, but the crawl in" not in r.stderr
    for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
        (jobdir / "neardup" / name).unlink(missing_ok=True)
    r = scrapy_crawl(server.url, tmp_path / "b", f"JOBDIR={jobdir}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"index {jobdir / 'neardup' / 'index.sqlite3'} is new, but the crawl in {jobdir} ran before" in r.stderr


def test_a_spider_renamed_by_its_arguments_resumes_its_jobdir(site, tmp_path):
    """The frontier records the spider instance's name (``-a name=...`` renames a spider): that spider resumes
    it, and the class's own name, another spider, is refused."""
    s, server = site
    jobdir = tmp_path / "job"
    r = scrapy_crawl(server.url, tmp_path / "a", f"JOBDIR={jobdir}", args=("-a", "name=shop", "-a", "max_pages=4"))
    assert r.returncode == 0, r.stderr[-2000:]
    r = scrapy_crawl(server.url, tmp_path / "b", f"JOBDIR={jobdir}", args=("-a", "name=shop"))
    assert r.returncode == 0 and "'finish_reason': 'finished'" in r.stderr, r.stderr[-2000:]
    r = scrapy_crawl(server.url, tmp_path / "c", f"JOBDIR={jobdir}")
    assert r.returncode != 0 and "is the queue of spider 'shop', not 'site'" in r.stderr, r.stderr[-2000:]


def test_html_that_scrapy_takes_for_html_is_checked_and_gives_its_item(tmp_path):
    """Served without a Content-Type, a page that opens with a long comment is HTML to Scrapy (its sniffing
    reads 5,000 bytes), and its links were followed, but the filter sniffed 512 and passed it unchecked: its
    exact copies were all kept. Served as ``application/octet-stream``, a page the filter checked and kept
    had no item from the ready spider, which looked for "html" in the Content-Type."""
    from tests.fixtures.http import PageServer

    words = " ".join(f"word{i} harbour lantern" for i in range(60))
    page = (b"<!-- " + b"x" * 600 + b" -->\n<html><head><title>Same</title></head><body><p>" + words.encode()
            + b"</p></body></html>")
    other = b"<html><head><title>Other</title></head><body><p>" + words.replace("word", "term").encode() + b"</p></body></html>"
    index = b"<html><body>" + b"".join(b'<a href="/noct/%d">n</a> ' % i for i in range(3)) + b'<a href="/octet/1">o</a>' \
        + b"<p>" + " ".join(f"index{i} meadow" for i in range(40)).encode() + b"</p></body></html>"

    def respond(target: str) -> tuple[int, dict[str, str], bytes]:
        if target.startswith("/noct/"):
            return 200, {}, page
        if target.startswith("/octet/"):
            return 200, {"Content-Type": "application/octet-stream"}, other
        return 200, {"Content-Type": "text/html"}, index

    with PageServer(respond) as server:
        base = server.url + "/"
        r = scrapy_crawl(base, tmp_path, "ROBOTSTXT_OBEY=False")
    assert r.returncode == 0, r.stderr[-3000:]
    assert stat(r.stderr, "neardup/skipped/non_html") is None, r.stderr[-3000:]
    assert stat(r.stderr, "neardup/dropped") == 2
    urls = sorted(i["url"] for i in read_jsonl(tmp_path / "pages.jsonl"))
    assert f"{base}octet/1" in urls and len([u for u in urls if "/noct/" in u]) == 1, urls
