"""Faults in a real crawl give a clear error and lose nothing: a full disk
(a small tmpfs), a read-only JOBDIR, a second crawl on the same JOBDIR or
store (issue 24), a store made with other settings (issue 14)."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.dup_site import DupSite
from tests.fixtures.http import PageServer
from tests.test_kill_resume import check, crawl_cmd


@pytest.fixture()
def tmpfs(tmp_path):
    """A directory on a tmpfs of its own (1 MB), or skip where mounting is not allowed."""
    mnt = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): a full or read-only disk needs one")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``cmd``; past ``timeout`` fail with the end of its log and every thread's stack
    (SIGABRT makes the interpreter's faulthandler print them), so a hang says where it stood."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            pytest.fail(f"{' '.join(cmd[3:6])} did not end in {timeout} s; the end of its log and its threads:\n{err[-20000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def fill(directory: Path, leave: int) -> None:
    """Fill the file system of ``directory`` (a tmpfs) until ``leave`` bytes are free. With
    ``leave=0`` the file system may run out a block before the count statvfs gave (its own
    blocks): that is the full disk asked for, not an error, or the server's request that
    fills it would fail and Scrapy would retry it (a page requested once more than the test allows)."""
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    with open(directory / f"filler-{uuid.uuid4().hex[:6]}", "wb", buffering=0) as fh:
        todo = memoryview(b"\0" * max(0, free - leave))
        try:
            while todo:  # an unbuffered write may write part of it
                todo = todo[fh.write(todo):]
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


class DiskFiller:
    """A site's ``delay`` that fills ``tmpfs`` once ``at`` requests have reached ``server`` (set
    once it serves), leaving ``leave`` bytes free: the disk fills while the crawl is under way."""

    def __init__(self, site: DupSite, tmpfs: Path, at: int, leave: int) -> None:
        self.site, self.tmpfs, self.at, self.leave = site, tmpfs, at, leave
        self.server: PageServer | None = None
        self.filled = threading.Event()
        self._lock = threading.Lock()

    def delay(self, path: str) -> float:
        with self._lock:
            if not self.filled.is_set() and self.server is not None and len(self.server.requests) >= self.at:
                fill(self.tmpfs, leave=self.leave)
                self.filled.set()
        return random.Random(path).uniform(*self.site.delay)


def test_a_full_disk_stops_the_crawl_clearly_and_a_resume_loses_nothing(tmpfs, tmp_path):
    """The disk fills once the crawl is under way (at its 5th request), leaving room for a page
    or two: what its start writes (350-400 KB, which a fixed room left at the start had to guess:
    with less, the disk filled while the crawl started, and Scrapy's start-up errors followed)
    does not matter."""
    site = DupSite()
    job = tmpfs / "job"
    feed = tmp_path / "feed.jsonl"
    filler = DiskFiller(site, tmpfs, at=5, leave=64 * 1024)
    with PageServer(site.page, filler.delay) as server:
        filler.server = server
        r = run(crawl_cmd(server.url, job, feed))
        log = r.stderr
        (tmp_path / "first.log").write_text(log)
        assert filler.filled.is_set(), log[-3000:]
        assert "'finish_reason': 'finished'" not in log, "the crawl should have run out of disk"
        assert "disk is full" in log.lower() or "no space left" in log.lower(), log[-3000:]
        assert "Traceback" not in log.split("Dumping Scrapy stats")[0] or "stopping the crawl" in log, log[-3000:]
        # move the job to a disk with room, as a user would, and resume
        moved = tmp_path / "job"
        shutil.copytree(job, moved)
        r2 = run(crawl_cmd(server.url, moved, feed))
        (tmp_path / "resume.log").write_text(r2.stderr)
        assert "'finish_reason': 'finished'" in r2.stderr, r2.stderr[-3000:]
        check(site, moved, feed, server.hits, 1, "after a full disk")


def test_a_full_disk_under_the_duplicates_file_stops_the_crawl_and_a_resume_loses_nothing(tmpfs, tmp_path):
    """The duplicates file (a gate of the durable frontier: a request is acknowledged once its
    drop line is written) on a disk that fills mid-crawl: the crawl stops with an error naming the
    file. Its failed flush used to raise in every ``next_request``, so the crawl never ended."""
    site = DupSite()
    job, feed = tmp_path / "job", tmp_path / "feed.jsonl"
    dups = tmpfs / "duplicates.jsonl"
    filler = DiskFiller(site, tmpfs, at=8, leave=0)
    with PageServer(site.page, filler.delay) as server:
        filler.server = server
        r = run([*crawl_cmd(server.url, job, feed), "-s", f"NEARDUP_DUPLICATES_FILE={dups}"], timeout=180)
        log = r.stderr
        assert filler.filled.is_set(), log[-3000:]
        assert f"the duplicates file {dups} cannot be written" in log and "No space left" in log, log[-3000:]
        assert "'finish_reason': 'duplicates_file_error'" in log, log[-3000:]
        assert "Traceback" not in log, log[-5000:]
        moved = tmp_path / "duplicates.jsonl"  # (to a disk with room, as a user would)
        shutil.copy(dups, moved)
        r2 = run([*crawl_cmd(server.url, job, feed), "-s", f"NEARDUP_DUPLICATES_FILE={moved}"])
        assert "'finish_reason': 'finished'" in r2.stderr, r2.stderr[-3000:]
        check(site, job, feed, server.hits, 1, "after a full disk under the duplicates file")
    lines = [json.loads(line) for line in moved.read_text().splitlines()]
    drops = [(d["url"], d["duplicate_of"]) for d in lines if not d.get("avoided") and "duplicate_of" in d]
    assert drops and len(drops) == len(set(drops)), "a drop written twice"


def test_a_full_disk_under_the_feed_stops_the_crawl_and_a_resume_loses_nothing(tmpfs, tmp_path):
    """The feed files on a disk that fills mid-crawl (JOBDIR elsewhere): the crawl stops with an
    error naming a feed; once there is room again, the resume cuts each feed to its committed items
    and fetches the rest again, so each holds every kept page once. The crawl used to go on,
    acknowledging requests whose items the full disk had lost, and the resume could not bring them back."""
    site = DupSite()
    job, feed = tmp_path / "job", tmpfs / "feed.jsonl"
    filler = DiskFiller(site, tmpfs, at=8, leave=0)
    with PageServer(site.page, filler.delay) as server:
        filler.server = server
        r = run(crawl_cmd(server.url, job, feed), timeout=180)
        log = r.stderr
        assert filler.filled.is_set(), log[-3000:]
        assert "frontier: the feed " in log and "cannot be written" in log and "No space left" in log, log[-3000:]
        assert "'finish_reason': 'feed_error'" in log, log[-3000:]
        for filler in tmpfs.glob("filler-*"):  # room again, as a user would make it
            filler.unlink()
        r2 = run(crawl_cmd(server.url, job, feed))
        assert "'finish_reason': 'finished'" in r2.stderr, r2.stderr[-3000:]
        check(site, job, feed, server.hits, 1, "after a full disk under the feed")


def test_a_read_only_jobdir_is_a_clear_error(tmpfs, tmp_path):
    (tmpfs / "job").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    r = run(crawl_cmd("http://127.0.0.1:9", tmpfs / "job", tmp_path / "feed.jsonl"), timeout=120)
    assert r.returncode != 0
    assert "read-only" in r.stderr.lower() and str(tmpfs / "job") in r.stderr, r.stderr[-2000:]


def refused_at_start(r: subprocess.CompletedProcess, message: str, error: str = "CrawlInUse") -> None:
    """The crawl stopped before it began, with one error that says ``message``:
    no engine started, so none of its errors followed (issue 24)."""
    log = r.stderr
    assert r.returncode != 0, log[-3000:]
    assert f"{error}: {message}" in log, log[-3000:]
    if error == "CrawlInUse":
        assert "wait for it to finish" in log and "redis:// NEARDUP_STORE" in log
    assert log.count("Traceback") == 1, log[-5000:]  # (Scrapy logs the failed start once)
    for cascade in ("Spider opened", "Scraper close failure", "Error caught on signal handler", "Dumping Scrapy stats",
                    "readonly=True"):
        assert cascade not in log, (cascade, log[-5000:])


@pytest.mark.parametrize("damage", ["not SQLite", "another kind", "another format"])
def test_a_frontier_it_cannot_resume_from_is_refused_at_start(tmp_path, damage):
    """A JOBDIR whose frontier file is damaged, another kind of SQLite file or of
    another format: one error naming the file, before the engine starts (not
    inside its failing start, where Scrapy's own errors followed it)."""
    job = tmp_path / "job"
    job.mkdir()
    path = job / "frontier.sqlite3"
    if damage == "not SQLite":
        path.write_bytes(b"this is not a database" * 400)
    else:
        import sqlite3
        db = sqlite3.connect(path)
        if damage == "another kind":
            db.execute("CREATE TABLE pages (url TEXT)")
        else:
            db.executescript("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT); CREATE TABLE requests (x);"
                             "CREATE TABLE seen (fp BLOB); INSERT INTO meta VALUES ('format', '0');")
        db.commit()
        db.close()
    r = run(crawl_cmd("http://127.0.0.1:9", job, tmp_path / "feed.jsonl"), timeout=120)
    message = f"frontier {path}" + (" has format 0" if damage == "another format" else ": cannot resume from it")
    refused_at_start(r, message, error="FrontierError")


def test_a_second_crawl_on_a_jobdir_or_store_in_use_is_refused_at_start(tmp_path):
    site = DupSite()
    job, feed = tmp_path / "job", tmp_path / "a.jsonl"
    store = job / "neardup"  # (where it is by default; named, so that another JOBDIR can share it)
    go_on = threading.Event()  # the site answers nothing until then: the first crawl is running, holding its files

    def held(path: str) -> float:
        go_on.wait(120)
        return 0.01

    with PageServer(site.page, held) as server:
        with open(tmp_path / "first.log", "w") as err:
            first = subprocess.Popen(crawl_cmd(server.url, job, feed) + ["-s", f"NEARDUP_STORE={store}"], cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 60
            while not server.hits and time.monotonic() < deadline:
                time.sleep(0.05)
            # the same JOBDIR (its store with it, by default)
            r = run(crawl_cmd(server.url, job, tmp_path / "b.jsonl"), timeout=120)
            refused_at_start(r, f"another crawl is using JOBDIR {job} (it holds {job / 'frontier.lock'})")
            # another JOBDIR, the same store directory
            r = run(crawl_cmd(server.url, tmp_path / "job2", tmp_path / "c.jsonl") + ["-s", f"NEARDUP_STORE={store}"],
                    timeout=120)
            refused_at_start(r, f"another crawl is using the store {store} (it holds {store / 'writer.lock'})")
            go_on.set()
            first.wait(timeout=300)
        finally:
            go_on.set()
            if first.poll() is None:
                first.kill()
                first.wait()
        # the first crawl never noticed: it finished with all of its pages, each requested once
        log = (tmp_path / "first.log").read_text()
        assert first.returncode == 0 and "'finish_reason': 'finished'" in log, log[-3000:]
        check(site, job, feed, server.hits, 0, "beside two refused crawls")


def test_a_store_made_with_another_k_is_refused(tmp_path):
    site = DupSite(n=8)
    with site.serve() as server:
        r = run(crawl_cmd(server.url, tmp_path / "job", tmp_path / "a.jsonl"))
        assert "'finish_reason': 'finished'" in r.stderr
        r2 = run(crawl_cmd(server.url, tmp_path / "job", tmp_path / "b.jsonl") + ["-s", "NEARDUP_MAX_DISTANCE=4"])
        assert r2.returncode != 0
        assert "max_distance=3, asked for 4" in r2.stderr, r2.stderr[-2000:]


def test_a_full_disk_at_the_start_is_named_with_the_file(tmpfs):
    """The index and the URL rule book made on a full disk: SQLite's error ("disk I/O error",
    "database or disk is full") names the file and says the disk is full."""
    import sqlite3

    from scrapy_neardup.crawler.index import PageIndex
    from scrapy_neardup.crawler.url_rules.storage import SqliteStorage

    fill(tmpfs, leave=0)
    for make, name, kind in ((PageIndex, "index.sqlite3", "an index of kept pages"),
                             (SqliteStorage, "url_rules.sqlite3", "a URL rule book")):
        with pytest.raises(sqlite3.OperationalError) as got:
            make(tmpfs / name)
        message = str(got.value)
        assert f"cannot open {kind} {tmpfs / name}: " in message and "(the disk is full: " in message, message


def test_requests_waiting_out_download_delay_at_every_kill_are_never_given_up(tmp_path):
    """A crawl killed again and again while its requests wait out DOWNLOAD_DELAY (a polite crawl that is
    stopped often): the server never saw them, so the kills are not theirs. They were counted as in flight
    at each kill, and after NEARDUP_FRONTIER_MAX_REDELIVERIES + 1 kills given up, never fetched: a
    user's crawl ended "finished" with no page. Now the whole site is kept once the crawl runs freely."""
    site = DupSite()
    job, feed = tmp_path / "job", tmp_path / "feed.jsonl"
    slow = ["-s", "DOWNLOAD_DELAY=60", "-s", "RANDOMIZE_DOWNLOAD_DELAY=False"]
    kills = 0
    with site.serve() as server:
        for attempt in range(5):  # (the default limit gives up at the 4th)
            before = sum(server.hits.values())
            proc = subprocess.Popen(crawl_cmd(server.url, job, feed, run=attempt) + slow, cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and sum(server.hits.values()) == before and proc.poll() is None:
                time.sleep(0.05)  # the first request of the run (the slot's first goes at once) ...
            time.sleep(1.5)  # ... and its outlinks queued behind the delay
            assert proc.poll() is None
            proc.kill()
            proc.wait()
            kills += 1
        r = run(crawl_cmd(server.url, job, feed, run=5))
        assert "'finish_reason': 'finished'" in r.stderr, r.stderr[-3000:]
        assert "giving up a request" not in r.stderr, r.stderr[-3000:]
        check(site, job, feed, server.hits, kills, "after kills while requests waited out DOWNLOAD_DELAY")


START_URLS_SPIDER = '''
import scrapy


class StartUrls(scrapy.Spider):
    name = "start_urls"

    def __init__(self, base="", **kw):
        super().__init__(**kw)
        self.start_urls = [f"{base}/p{i}" for i in range(4)]

    def parse(self, response):
        yield {"url": response.url}
'''


def test_start_requests_in_flight_at_a_kill_are_emitted_once_after_the_resume(tmp_path):
    """A spider's start requests are made again at every start, and are dont_filter: one in flight at a
    kill was fetched twice after the resume, new and as a redelivery, and its item was in the feed twice
    (6 items for 4 URLs in a user's trial). The one made again is now taken for the row in flight."""
    texts = [" ".join(f"word{i}x{j} theme{i}" for j in range(60)) for i in range(4)]

    def page(path: str) -> tuple[int, dict[str, str], bytes]:
        i = int(path.removeprefix("/p")) if path[:2] == "/p" and path[2:].isdigit() else -1
        if i < 0:
            return 404, {"Content-Type": "text/plain"}, b"no"
        return 200, {"Content-Type": "text/html"}, f"<html><body><p>{texts[i]}</p></body></html>".encode()

    def delay(path: str) -> float:  # the first run's answers come too late: it is killed with all four in flight
        return 30.0 if server.hits[path] == 1 else 0.0

    spider = tmp_path / "start_urls.py"
    spider.write_text(START_URLS_SPIDER)
    job, feed = tmp_path / "job", tmp_path / "items.jsonl"
    with PageServer(page, delay) as server:
        cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"base={server.url}",
               "-o", str(feed), "-s", f"JOBDIR={job}", "-s", "ROBOTSTXT_OBEY=False",
               "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=8", "-s", "LOG_LEVEL=INFO"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(server.hits[f"/p{i}"] for i in range(4)) < 4:
            time.sleep(0.05)
        time.sleep(0.5)  # (their responses reached: the server answered none yet)
        proc.kill()
        proc.wait()
        r = run(cmd)
        assert r.returncode == 0 and "'finish_reason': 'finished'" in r.stderr, r.stderr[-3000:]
    urls = [json.loads(line)["url"] for line in feed.read_text().splitlines()]
    assert sorted(urls) == [f"{server.url}/p{i}" for i in range(4)], urls
    assert all(server.hits[f"/p{i}"] == 2 for i in range(4)), server.hits


def test_a_store_whose_disk_fills_is_resumed_from_what_it_committed(tmpfs, tmp_path):
    """The store (``NEARDUP_STORE``) on a disk that fills, the JOBDIR on another: the store's tables counted
    the fingerprint whose commit failed, and the frontier, still writable, recorded that count as it
    closed, so every resume was refused as of a store that had lost fingerprints. Once a store write
    has failed, the frontier records its size no more; the resume, the store moved to a disk with room,
    goes on from what it committed."""
    site = DupSite()
    job, feed = tmp_path / "job", tmp_path / "feed.jsonl"
    filler = DiskFiller(site, tmpfs, at=5, leave=16 * 1024)
    with PageServer(site.page, filler.delay) as server:
        filler.server = server
        r = run([*crawl_cmd(server.url, job, feed), "-s", f"NEARDUP_STORE={tmpfs / 'store'}"])
        (tmp_path / "first.log").write_text(r.stderr)
        assert filler.filled.is_set(), r.stderr[-3000:]
        assert "'finish_reason': 'finished'" not in r.stderr, "the store should have run out of disk"
        moved = tmp_path / "store"
        shutil.copytree(tmpfs / "store", moved)
        r2 = run([*crawl_cmd(server.url, job, feed), "-s", f"NEARDUP_STORE={moved}"])
        (tmp_path / "resume.log").write_text(r2.stderr)
        assert "lost its -wal file" not in r2.stderr, r2.stderr[-3000:]
        assert "'finish_reason': 'finished'" in r2.stderr, r2.stderr[-3000:]
