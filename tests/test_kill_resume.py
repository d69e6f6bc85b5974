"""Kill -9 a real ``scrapy crawl`` at random moments, resume it until it finishes,
and check that nothing was lost and nothing indexed twice (issue 14), and that
the local feed files hold each kept page once, each one valid document: JSON
lines, JSON, CSV and XML appended to across the runs, and a JSON file per run.

Each trial has a recorded seed (in the test id and the failure message); set
``NEARDUP_KILL_TRIALS`` for more trials than the default three.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures import linked_back
from tests.fixtures.dup_site import DupSite
from tests.test_index_is_the_filters import user_project

K = 3
KILLS = 3
TRIALS = int(os.environ.get("NEARDUP_KILL_TRIALS", "3"))


#: The feeds beside the JSON lines one, appended to across the runs (one per format)
APPENDED = ("feed.json", "feed.csv", "feed.xml")


def crawl_cmd(url: str, jobdir: Path, feed: Path, run: int = 0) -> list[str]:
    feeds = ["-o", str(feed)]
    for name in APPENDED:
        feeds += ["-o", str(feed.parent / f"{jobdir.name}-{name}")]
    feeds += ["-o", str(feed.parent / f"{jobdir.name}-runs" / f"run-{run}.json")]  # a new file per run
    return [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", "site",
            "-a", f"start_url={url}/a/0.html", *feeds,
            "-s", f"JOBDIR={jobdir}", "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False",
            "-s", "CONCURRENT_REQUESTS=8", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=4",
            "-s", "LOG_LEVEL=INFO", "-s", "STATS_DUMP=True"]


def index_rows(jobdir: Path) -> tuple[list[tuple[str, str]], list[str]]:
    db = sqlite3.connect(jobdir / "neardup" / "index.sqlite3")
    try:
        pages = db.execute("SELECT url, fingerprint FROM pages").fetchall()
        fts = [u for (u,) in db.execute("SELECT url FROM pages_fts")]
    finally:
        db.close()
    return pages, fts


def feed_urls(feed: Path) -> list[str]:
    """The URLs of a JSON lines feed's items, in order; every line must be whole and valid."""
    return [json.loads(line)["url"] for line in feed.read_text().splitlines()] if feed.exists() else []


def document_urls(path: Path) -> list[str]:
    """The URLs of the items of a JSON, CSV or XML feed file, which must parse as one document."""
    text = path.read_text()
    if path.suffix == ".json":
        return [item["url"] for item in json.loads(text)]
    if path.suffix == ".xml":
        return [item.findtext("url") or "" for item in ET.fromstring(text).iter("item")]
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and "url" in rows[0], f"{path}: no header row"
    assert rows[0] not in rows[1:], f"{path}: the header row twice"
    return [r[rows[0].index("url")] for r in rows[1:]]


def check_feeds(jobdir: Path, feed: Path, indexed: list[str], what: str) -> None:
    """Each feed holds every indexed page once (exactly-once), and nothing else."""
    runs = sorted((feed.parent / f"{jobdir.name}-runs").glob("run-*.json"))
    per_run = [u for r in runs for u in document_urls(r)]
    for name, urls in [(feed.name, feed_urls(feed)), ("the files per run", per_run),
                       *[(n, document_urls(feed.parent / f"{jobdir.name}-{n}")) for n in APPENDED]]:
        twice = sorted(u for u, c in Counter(urls).items() if c > 1)
        assert not twice, f"{what}: {name} has URLs twice: {twice[:5]}"
        assert set(urls) == set(indexed), f"{what}: {name} differs from the index: " \
            f"missing {sorted(set(indexed) - set(urls))[:5]}, extra {sorted(set(urls) - set(indexed))[:5]}"


def run_until_done(url: str, jobdir: Path, feed: Path, server, rng: random.Random, kills: int) -> tuple[int, str]:
    """Start the crawl; kill it ``kills`` times at random moments (after a random
    number of new requests reached the server); then let it finish."""
    done_kills = 0
    log = jobdir.parent / f"{jobdir.name}.log"
    for run in itertools.count():
        before = sum(server.hits.values())
        with open(log, "w") as err:
            proc = subprocess.Popen(crawl_cmd(url, jobdir, feed, run), cwd=ROOT, stdout=subprocess.DEVNULL,
                                    stderr=err)
        if done_kills < kills:
            target = before + rng.randint(1, 40)
            deadline = time.monotonic() + 60
            while sum(server.hits.values()) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if proc.poll() is None:
                workers = children(proc.pid)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                done_kills += 1
                assert_gone(workers)
                continue
        proc.wait(timeout=300)
        text = log.read_text()
        assert proc.returncode == 0, text[-3000:]
        if "'finish_reason': 'finished'" in text:
            assert "Error storing" not in text, text[-3000:]
            return done_kills, text
    raise AssertionError("unreachable")


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def assert_gone(pids: list[int], timeout: float = 10.0) -> None:
    """The crawl's worker processes end with it, even when it is killed."""
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists()
                 and "zombie" not in Path(f"/proc/{p}/status").read_text(errors="replace").lower()]
        time.sleep(0.05)
    assert not alive, f"processes outlived the killed crawl: {alive}"


def check(site: DupSite, jobdir: Path, feed: Path, hits, kills: int, what: str) -> set[int]:
    pages, fts = index_rows(jobdir)
    urls = [u for u, _ in pages]
    base = urls[0].split("/a/")[0] if urls else ""
    paths = [u[len(base):] for u in urls]
    assert len(fts) == len(set(fts)) == len(urls), f"{what}: a page twice in the full-text index"
    group_of = {p: gi for gi, g in enumerate(site.groups()) for p in g}
    stray = [p for p in paths if p not in group_of]
    assert not stray, f"{what}: pages that are no article in the index: {stray}"
    count = {gi: 0 for gi in range(len(site.groups()))}
    for p in paths:
        count[group_of[p]] += 1
    assert all(c == 1 for c in count.values()), \
        f"{what}: groups not kept exactly once: {[(gi, c) for gi, c in count.items() if c != 1]}"
    fps = [int(fp, 16) for _, fp in pages]
    close = [(a, b) for (a, fa), (b, fb) in itertools.combinations(zip(paths, fps), 2) if (fa ^ fb).bit_count() <= K]
    assert not close, f"{what}: kept pages within {K} bits: {close}"
    over = {p: n for p, n in hits.items() if n > kills + 1}
    assert not over, f"{what}: requested more than kills + 1 = {kills + 1} times: {over}"
    check_feeds(jobdir, feed, urls, what)
    return set(count)


@pytest.mark.parametrize("seed", list(range(1, TRIALS + 1)))
def test_kill_and_resume_loses_nothing(seed, tmp_path):
    site = DupSite()
    with site.serve() as clean_server:
        kills, _ = run_until_done(clean_server.url, tmp_path / "clean", tmp_path / "clean.jsonl", clean_server,
                                  random.Random(0), 0)
        clean_groups = check(site, tmp_path / "clean", tmp_path / "clean.jsonl", clean_server.hits, 0, "clean run")
    with site.serve() as server:
        rng = random.Random(seed)
        kills, log = run_until_done(server.url, tmp_path / "job", tmp_path / "feed.jsonl", server, rng, KILLS)
        what = f"seed {seed}, {kills} kills"
        groups = check(site, tmp_path / "job", tmp_path / "feed.jsonl", server.hits, kills, what)
        assert groups == clean_groups, what


#: A spider as a user writes one: an item a page, every link followed (its start request is not filtered)
FOLLOW_SPIDER = '''
import scrapy


class FollowSpider(scrapy.Spider):
    name = "follow"

    def __init__(self, start="", **kwargs):
        self.start_urls = [start]
        super().__init__(**kwargs)

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


class FollowParseSpider(FollowSpider):
    """The same, naming its callback (its start request names none: both are ``parse``)."""

    name = "follow_parse"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
'''


@pytest.mark.parametrize("spider", ["follow", "titles"])
def test_a_page_linked_again_and_killed_in_flight_is_emitted_once(tmp_path, spider):
    """The start page is requested again through a link back to it (start requests skip the dupe filter),
    and the crawl is killed while that second request waits for its server's answer. It had produced
    nothing, but every request in flight was handed out again to be emitted again: the start page's item
    was in the feed twice after the resume (``follow``). Now only a request that had stored its page is.
    A ``CrawlSpider`` (``titles``) gives the start page's item from that second request only, a rule's
    callback: the resumed crawl knows from the frontier which callback the start page was stored for,
    so its item is not held back as an unchanged page's."""
    project = user_project(tmp_path / "proj")
    (project / "userproj" / "spiders" / "follow.py").write_text(FOLLOW_SPIDER)
    jobdir, feed = tmp_path / "job", tmp_path / "feed.jsonl"
    with linked_back.serve(hold=True) as site:
        cmd = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"start={site.url}/index.html",
               "-o", str(feed), "-s", f"JOBDIR={jobdir}", "-s", "LOG_LEVEL=INFO", "-s", "STATS_DUMP=True"]
        proc = subprocess.Popen(cmd, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert site.held.wait(120), "the link back to the start page was never requested"
        time.sleep(3)  # (what was done before it is committed: the frontier checkpoints every second)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        site.release.set()
        done = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=300)
        assert "'finish_reason': 'finished'" in done.stderr, done.stderr[-3000:]
        assert sorted(feed_urls(feed)) == site.urls()
