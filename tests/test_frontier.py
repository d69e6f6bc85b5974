"""The durable frontier's parts: the JSON codec, the SQLite file and the scheduler's order."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest
from scrapy.utils.test import get_crawler

from scrapy_neardup.crawler.frontier.codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from scrapy_neardup.crawler.frontier.db import FrontierDB, FrontierError, refuse_a_damaged_frontier
from scrapy_neardup.crawler.frontier.scheduler import DurableScheduler
from tests.conftest import ROOT


class S(Spider):
    name = "s"

    def parse_item(self, response):  # noqa: ANN001, ANN201
        pass

    def on_error(self, failure):  # noqa: ANN001, ANN201
        pass


# -- codec -------------------------------------------------------------------------


def test_codec_round_trips_what_scrapy_requests_carry():
    spider = S()
    r = Request("http://a.test/p?q=1", method="POST", body=b"\x00\xffbin", headers={"X-A": ["1", "2"]},
                cookies={"c": "v"}, meta={"depth": 3, "t": (1, "x"), "b": b"\x01", "d": {1: "int key"},
                                          "$odd": "dollar key", "nested": [{"k": (2,)}]},
                priority=-4, dont_filter=True, callback=spider.parse_item, errback=spider.on_error,
                cb_kwargs={"page": 2}, flags=["f"], encoding="latin-1")
    back = decode_request(encode_request(r, spider), spider)
    assert back.url == r.url and back.method == "POST" and back.body == r.body
    assert back.headers.getlist("X-A") == [b"1", b"2"]
    assert back.meta == r.meta
    assert (back.priority, back.dont_filter, back.cb_kwargs, back.flags, back.encoding) == (-4, True, {"page": 2},
                                                                                           ["f"], "latin-1")
    assert back.callback == spider.parse_item and back.errback == spider.on_error


def test_codec_keeps_request_subclasses_of_loaded_modules():
    r = FormRequest("http://a.test/", formdata={"a": "1"})
    assert type(decode_request(encode_request(r))) is FormRequest


def test_codec_refuses_what_json_cannot_hold_naming_it():
    with pytest.raises(UnserializableRequest, match=r"meta.*'obj'.*object"):
        encode_request(Request("http://a.test/", meta={"obj": object()}))
    with pytest.raises(UnserializableRequest):  # a callback that is no method of the spider
        encode_request(Request("http://a.test/", callback=lambda r: None), S())


def test_codec_never_imports_a_module_a_stored_request_names():
    data = encode_request(Request("http://a.test/")).replace('"url"', '"_class":"antigravity.Request","url"', 1)
    with pytest.raises(CorruptRequest, match="has not imported"):
        decode_request(data)
    assert "antigravity" not in sys.modules
    with pytest.raises(CorruptRequest):
        decode_request("{not json")


# -- the SQLite file -------------------------------------------------------------------


def test_in_flight_requests_are_queued_again_after_a_crash(tmp_path):
    db = FrontierDB(tmp_path)
    for i in range(3):
        db.push("h", 0, f"r{i}")
    db.commit()
    db.push("h", 0, "r3")
    db.push("h", 0, "r4")
    db.commit()
    raced = db.pop("h")
    stored = db.pop("h")
    taken = db.pop("h")
    waiting = db.pop("h")  # (handed out, still waiting in the downloader: no response yet)
    for rid in (raced.id, stored.id, taken.id):
        db.reached(rid)  # (its response arrived: committed at once)
    for rid in (raced.id, stored.id):
        db.storing(rid)  # (its page is being stored as new: committed at once)
    db.stored_nothing(raced.id)  # (a shared store's other process had stored it first)
    db.commit()
    # the process dies here: no close
    db.db.close()
    os.close(db._lock_fd)
    db2 = FrontierDB(tmp_path)
    # the three are queued again; the two answered count a kill; only the one that stored its page is emitted
    # again (its outputs may be half committed), the others produced nothing
    assert db2.redelivered == 4 and len(db2) == 5
    rows = [db2.pop("h") for _ in range(5)]
    assert {r.data: (r.redelivered, r.kills, r.emit) for r in rows} == {
        stored.data: (1, 1, 1), raced.data: (1, 1, 0), taken.data: (1, 1, 0), waiting.data: (1, 0, 0),
        "r0": (0, 0, 0)}
    db2.commit()
    db2.db.close()  # (killed again, handed out: the emit mark stays until the request is done)
    os.close(db2._lock_fd)
    db3 = FrontierDB(tmp_path)
    rows = [db3.pop("h") for _ in range(5)]
    assert {r.data: (r.redelivered, r.kills, r.emit) for r in rows} == {
        stored.data: (2, 1, 1), raced.data: (2, 1, 0), taken.data: (2, 1, 0), waiting.data: (2, 0, 0),
        "r0": (1, 0, 0)}
    db3.close()


@pytest.mark.parametrize("fmt", ["1", "2"])
def test_an_earlier_format_frontier_is_read_and_marked_3(tmp_path, fmt):
    """A JOBDIR from before state 3 (a page being stored; format 2) or state 2 (a response arrived; format
    1) resumes, every request it had in flight counted as its format counted them; the file is then format
    3, which a version that reads only earlier formats refuses (it would leave state-3 rows stuck, neither
    queued nor done)."""
    db = FrontierDB(tmp_path)
    for data in ("queued", "redelivered before", "in flight"):  # (the last first: LIFO)
        db.push("h", 0, data)
    db.db.execute("UPDATE meta SET value = ? WHERE name = 'format'", (fmt,))
    db.pop("h")
    db.db.execute("UPDATE requests SET redelivered = 1 WHERE data = 'redelivered before'")
    db.db.execute("ALTER TABLE requests DROP COLUMN emit")  # (neither had such a column)
    if fmt == "1":
        db.db.execute("ALTER TABLE requests DROP COLUMN kills")
    db.commit()
    db.db.close()
    os.close(db._lock_fd)
    refuse_a_damaged_frontier(tmp_path)  # (an earlier format is not refused)
    db2 = FrontierDB(tmp_path)
    # (neither has state 3: a request in flight may have stored its page, and sent its items, before the kill,
    # so it is emitted again, never taken for unchanged, as was one redelivered before, which its format had
    # marked so; in format 1, with no state 2 either, every request in flight counts a kill)
    rows = {r.data: (r.redelivered, r.kills, r.emit) for r in (db2.pop("h") for _ in range(3))}
    assert db2.redelivered == 1 and rows == {"in flight": (1, int(fmt == "1"), 1),
                                             "redelivered before": (1, int(fmt == "1"), 1), "queued": (0, 0, 0)}
    assert db2.db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0] == "3"
    db2.close()


def test_uncommitted_work_is_not_half_kept(tmp_path):
    db = FrontierDB(tmp_path)
    db.push("h", 0, "committed")
    assert db.seen_add(b"a" * 20)
    db.commit()
    db.push("h", 0, "lost")
    db.seen_add(b"b" * 20)
    db.db.close()  # a crash: the open transaction is rolled back
    os.close(db._lock_fd)
    db2 = FrontierDB(tmp_path)
    assert len(db2) == 1 and db2.seen_count == 1
    assert not db2.seen_add(b"a" * 20) and db2.seen_add(b"b" * 20)
    db2.close()


def test_after_a_failed_write_nothing_more_is_committed(tmp_path):
    """A full disk fails a write mid-transaction (here the file may not grow: SQLite's
    max_page_count gives the same SQLITE_FULL). SQLite may have rolled the transaction back,
    leaving the connection to commit each later statement on its own; or kept the part before
    the failure, which the close committed. Either way a request could be marked seen and never
    queued, or a parent acknowledged without its outlinks (a page lost after a full disk and a
    resume). What was committed before stays, and nothing after the failure is committed."""
    db = FrontierDB(tmp_path)
    db.push("h", 0, "committed")
    assert db.seen_add(b"a" * 20)
    db.commit()
    pages = db.db.execute("PRAGMA page_count").fetchone()[0]
    db.db.execute(f"PRAGMA max_page_count = {pages}")
    assert db.seen_add(b"b" * 20)  # (fits in a page the file has)
    with pytest.raises(FrontierError, match="the disk is full"):
        db.push("h", 0, "x" * 100_000)  # the file would grow: its outlink is not queued
    assert db.seen_add(b"c" * 20)  # later writes (another component's) ...
    with pytest.raises(FrontierError, match="the disk is full"):
        db.commit()  # ... are not committed, nor by a commit
    db.close()  # nor at the close
    db2 = FrontierDB(tmp_path)
    assert len(db2) == 1 and db2.seen_count == 1
    assert db2.seen_add(b"b" * 20) and db2.seen_add(b"c" * 20)
    db2.close()


@pytest.mark.parametrize("lifo", [True, False])
def test_priority_first_then_lifo_or_fifo(tmp_path, lifo):
    db = FrontierDB(tmp_path, lifo=lifo)
    for name, prio in [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", -1)]:
        db.push("h", prio, name)
    order = [db.pop("h").data for _ in range(5)]
    assert order == (["d", "b", "c", "a", "e"] if lifo else ["b", "d", "a", "c", "e"])
    assert db.pop("h") is None
    db.close()


def test_a_second_crawl_on_the_same_jobdir_is_refused(tmp_path):
    db = FrontierDB(tmp_path)
    code = ("import sys; from scrapy_neardup.crawler.frontier.db import FrontierDB, FrontierError\n"
            "try:\n    FrontierDB(sys.argv[1])\nexcept FrontierError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True).stdout
    assert f"another crawl is using JOBDIR {tmp_path}" in out
    db.close()


def test_a_damaged_frontier_is_a_clear_error(tmp_path):
    (tmp_path / FrontierDB.FILE).write_bytes(b"this is not a database" * 100)
    with pytest.raises(FrontierError, match="damaged"):
        FrontierDB(tmp_path)
    FrontierDB(tmp_path / "fresh").close()  # (the lock was let go: no leak of the failed open)


def test_a_truncated_frontier_is_a_clear_error(tmp_path):
    db = FrontierDB(tmp_path)
    for i in range(2000):
        db.push(f"h{i % 7}", i % 3, "x" * 200)
    db.close()
    path = tmp_path / FrontierDB.FILE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    with pytest.raises(FrontierError, match=str(path)):
        db2 = FrontierDB(tmp_path)
        while len(db2):  # (damage may only show when the pages are read)
            db2.pop(next(iter(db2.queued)))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_jobdir_is_a_clear_error(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(FrontierError, match="read-only"):
            FrontierDB(tmp_path / "job")
    finally:
        tmp_path.chmod(0o700)


def test_files_are_for_their_owner_only(tmp_path):
    FrontierDB(tmp_path).close()
    assert (tmp_path / FrontierDB.FILE).stat().st_mode & 0o077 == 0
    assert (tmp_path / "frontier.lock").stat().st_mode & 0o077 == 0


def test_nothing_is_pickled(tmp_path):
    db = FrontierDB(tmp_path)
    db.push("h", 0, encode_request(Request("http://a.test/", meta={"k": [1, b"2"]})))
    db.close()
    rows = sqlite3.connect(tmp_path / FrontierDB.FILE).execute("SELECT data FROM requests").fetchall()
    assert rows[0][0].startswith("{") and b"\x80" not in rows[0][0].encode()


# -- the scheduler ------------------------------------------------------------------------


def test_scheduler_orders_by_priority_and_spreads_over_slots(tmp_path):
    crawler = get_crawler(S, {"JOBDIR": str(tmp_path), "SCHEDULER": "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                              "DUPEFILTER_CLASS": "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter",
                              "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue"})
    crawler.spider = S()
    sched = DurableScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    try:
        for url, prio in [("http://a.test/1", 0), ("http://a.test/2", 1), ("http://b.test/1", 0),
                          ("http://a.test/1", 9)]:  # (the last one: already seen)
            sched.enqueue_request(Request(url, priority=prio))
        assert len(sched) == 3
        assert not sched.enqueue_request(Request("http://a.test/2"))
        assert sched.enqueue_request(Request("http://a.test/2", dont_filter=True))
        got = []
        while (r := sched.next_request()) is not None:
            got.append((r.url, r.priority))
        # without an engine no slot has active downloads: ties go by slot name, then priority, then FIFO
        assert got == [("http://a.test/2", 1), ("http://a.test/1", 0), ("http://a.test/2", 0), ("http://b.test/1", 0)]
    finally:
        sched.close("finished")
    assert crawler.stats.get_value("scheduler/enqueued") == 4


def test_the_seen_set_answers_the_same_past_its_cache_and_after_a_restart(tmp_path, monkeypatch):
    """The dupe filter's cache of recent fingerprints only saves look-ups: a URL
    pushed out of it, or seen by an earlier run, is still seen (the file says so)."""
    from scrapy_neardup.crawler.frontier import dupefilter

    monkeypatch.setattr(dupefilter, "RECENT_SEEN", 2)
    settings = {"JOBDIR": str(tmp_path), "SCHEDULER": "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                "DUPEFILTER_CLASS": "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter"}
    urls = [f"http://a.test/{i}" for i in range(5)]
    for run in range(2):
        crawler = get_crawler(S, settings)
        crawler.spider = S()
        sched = DurableScheduler.from_crawler(crawler)
        sched.open(crawler.spider)
        try:
            firsts = [sched.enqueue_request(Request(u)) for u in urls]  # (new in the first run only)
            assert firsts == [run == 0] * 5
            assert not any(sched.enqueue_request(Request(u)) for u in reversed(urls))  # 3 of 5 out of the cache
            assert len(sched.df._recent) == 2
        finally:
            sched.close("finished")


def test_unserializable_requests_stay_in_memory_and_are_counted(tmp_path, caplog):
    crawler = get_crawler(S, {"JOBDIR": str(tmp_path), "SCHEDULER": "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                              "DUPEFILTER_CLASS": "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter"})
    crawler.spider = S()
    sched = DurableScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    try:
        assert sched.enqueue_request(Request("http://a.test/x", meta={"obj": object()}))
        assert sched.next_request().url == "http://a.test/x"
    finally:
        sched.close("finished")
    assert crawler.stats.get_value("neardup/frontier/unserializable") == 1
    assert "cannot store" in caplog.text and "'obj'" in caplog.text


def test_every_request_is_acknowledged_exactly_when_done(tmp_path):
    """A crawl stopped early (not 'finished', so nothing is acknowledged wholesale at
    the end) leaves no request in flight: pages, redirects, 404s and drops were each
    acknowledged when their outputs were committed."""
    from tests.fixtures.dup_site import DupSite
    from tests.test_kill_resume import crawl_cmd

    with DupSite().serve() as server:
        r = subprocess.run(crawl_cmd(server.url, tmp_path / "job", tmp_path / "f.jsonl")
                           + ["-s", "CLOSESPIDER_PAGECOUNT=40"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert "'finish_reason': 'closespider_pagecount'" in r.stderr, r.stderr[-2000:]
    db = sqlite3.connect(tmp_path / "job" / FrontierDB.FILE)
    assert db.execute("SELECT COUNT(*) FROM requests WHERE state != 0").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM requests WHERE state = 0").fetchone()[0] > 0  # work left to resume
    assert "response_status_count/301" in r.stderr and "response_status_count/404" in r.stderr  # (it met both)


def _handed_at_each_start(tmp_path, limit: int, starts: int, answered, stored=lambda start: False
                          ) -> tuple[list, object]:
    """One request, its crawl killed ``starts`` times while it is in flight (with its server's answer
    first when ``answered(start)``, and its page stored as new when ``stored(start)``): how each start
    handed it out ("handed", "emit again": marked ``neardup_emit_again``, None: given up), and the last
    crawler."""
    settings = {"JOBDIR": str(tmp_path), "SCHEDULER": "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                "DUPEFILTER_CLASS": "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter",
                "NEARDUP_FRONTIER_MAX_REDELIVERIES": limit}
    handed = []
    for start in range(starts):
        crawler = get_crawler(S, settings)
        crawler.spider = S()
        sched = DurableScheduler.from_crawler(crawler)
        sched.open(crawler.spider)
        if start == 0:
            sched.enqueue_request(Request("http://a.test/page"))
        r = sched.next_request()
        handed.append(None if r is None else "emit again" if r.meta.get("neardup_emit_again") else "handed")
        if r is not None and answered(start):
            sched.tracker.reached(r.meta["neardup_frontier_id"])  # (headers_received)
        if r is not None and stored(start):
            assert sched.tracker.storing(r.meta["neardup_frontier_id"])  # (the verdict, before the store's add)
        sched.close("shutdown")  # (as a kill leaves it: in flight, never acknowledged)
    return handed, crawler


def test_a_request_in_flight_at_every_kill_is_given_up_after_max_redeliveries(tmp_path, caplog):
    """A page that kills the crawler each time it is fetched must not stop the crawl forever."""
    handed, crawler = _handed_at_each_start(tmp_path, 2, 4, answered=lambda start: True)
    assert handed == ["handed"] * 3 + [None]
    assert crawler.stats.get_value("neardup/frontier/given_up") == 1
    assert "giving up a request" in caplog.text


def test_a_request_killed_before_its_response_is_never_given_up(tmp_path):
    """A request waiting out DOWNLOAD_DELAY (or AutoThrottle's) in the downloader is in flight, but its server
    never saw it: kills then are not its doing. They were counted, and after NEARDUP_FRONTIER_MAX_REDELIVERIES
    + 1 kills such a request was given up, never fetched (a user's crawl lost its start page that way)."""
    # (at the 5th start its server answered before the kill: that one counts)
    handed, crawler = _handed_at_each_start(tmp_path, 1, 6, answered=lambda start: start == 4)
    assert handed == ["handed"] * 6
    assert not crawler.stats.get_value("neardup/frontier/given_up")
    handed, crawler = _handed_at_each_start(tmp_path / "b", 1, 4, answered=lambda start: start >= 1)
    assert handed == ["handed"] * 3 + [None]  # (answered at the 2nd and 3rd starts: 2 kills, past the limit of 1)


def test_a_request_is_emitted_again_only_once_it_stored_its_page_and_until_it_is_done(tmp_path):
    """A request killed before its page was stored produced nothing: it is judged afresh, and a page an
    earlier, finished request stored (a start URL linked again from the site) is unchanged for it. Every
    request in flight was handed out to be emitted again, so that page's items were emitted twice after a
    kill. One that stored its page may have half its outputs out: emitted again, at every start until done."""
    handed, _ = _handed_at_each_start(tmp_path, 9, 5, answered=lambda start: start >= 1, stored=lambda s: s == 2)
    assert handed == ["handed", "handed", "handed", "emit again", "emit again"]


def test_only_a_start_request_made_again_is_taken_for_its_row_in_flight(tmp_path):
    """At a resume a spider makes its start requests again (dont_filter): one equal to a row in flight at
    the stop is that row, not a second fetch. Any other dont_filter request (a spider polling a URL from
    its own callback) is queued, however like a row it is: it is the spider's wish, not a repeat."""
    settings = {"JOBDIR": str(tmp_path), "SCHEDULER": "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                "DUPEFILTER_CLASS": "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter"}

    def requests():
        return (Request("http://a.test/start", dont_filter=True, meta={"is_start_request": True}),
                Request("http://a.test/poll", dont_filter=True))

    crawler = get_crawler(S, settings)
    crawler.spider = S()
    sched = DurableScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    for r in requests():
        assert sched.enqueue_request(r)
    assert sched.next_request() and sched.next_request()  # both in flight at the kill
    sched.close("shutdown")
    crawler = get_crawler(S, settings)
    crawler.spider = S()
    sched = DurableScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    try:
        start, poll = requests()
        assert not sched.enqueue_request(start) and sched.enqueue_request(poll)
        assert len(sched) == 3  # the two rows of the last run, and the poll made again
        assert sched.enqueue_request(requests()[0])  # (a second start request alike: the row answered once)
        assert crawler.stats.get_value("neardup/frontier/already_queued") == 1
    finally:
        sched.close("shutdown")


def test_a_retry_of_a_request_to_emit_again_is_one_too():
    """A request handed out to be emitted again (it had stored its page at a kill) that times out and is
    retried, or is redirected, before its response: the copy replaced it without the mark, so its page was
    taken for unchanged and its items, never committed, were lost. A spider output that copies the
    response's meta is no replacement: it takes neither the id nor the mark."""
    from scrapy_neardup.crawler.frontier.acks import EMIT_AGAIN_KEY, ID_KEY, AckTracker

    tracker = AckTracker()
    request = tracker.hand_out(Request("http://a.test/page"), 7, emit_again=1)
    retry = request.copy()
    assert tracker.adopt(retry) == 7 and retry.meta.get(EMIT_AGAIN_KEY) and ID_KEY not in retry.meta
    tracker.responded(7)  # (its response came: what it yields now is no replacement)
    child = Request("http://a.test/next", meta=dict(request.meta))
    assert tracker.adopt(child) is None and EMIT_AGAIN_KEY not in child.meta


def test_a_frontier_is_refused_to_another_spider(tmp_path):
    """A JOBDIR resumed with another spider: its queued requests name the first spider's callbacks, so the
    crawl logged an error for each, dropped them (their URLs staying seen: the first spider could never
    fetch them again), and "finished". The frontier records its spider, and another is refused at start."""
    db = FrontierDB(tmp_path, spider="chain")
    db.push("s", 0, '{"url": "http://h/a"}')
    db.commit()
    db.close()
    refuse_a_damaged_frontier(tmp_path, "chain")
    with pytest.raises(FrontierError, match="is the queue of spider 'chain', not 'plain'"):
        refuse_a_damaged_frontier(tmp_path, "plain")
    with pytest.raises(FrontierError, match="resume it with the spider named 'chain'"):
        FrontierDB(tmp_path, spider="plain")
    again = FrontierDB(tmp_path, spider="chain")
    assert len(again) == 1
    again.close()
