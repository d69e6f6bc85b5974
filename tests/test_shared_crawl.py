"""Crawler processes sharing one frontier (scrapy-redis, reliable
acknowledgements) and one near-duplicate store on a real redis-server: two
processes keep and drop what one does (up to which member of a group wins)
and fetch no URL twice; one of them killed with SIGKILL mid-crawl, the
other finishes with nothing lost."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.dup_site import DupSite
from tests.fixtures.http import PageServer
from tests.test_crawl import stat
from tests.test_kill_resume import assert_gone, children

ADDONS = json.dumps({"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.PoliteCrawlAddon": 0,
                     "scrapy_neardup.SharedCrawlAddon": 0})
_dbs = iter(range(1, 16))


def shared_cmd(url: str, redis_url: str, jobdir: Path, *more: str) -> list[str]:
    return [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", "site",
            "-a", f"start_url={url}/a/0.html", "-s", f"ADDONS={ADDONS}", "-s", f"REDIS_URL={redis_url}",
            "-s", f"JOBDIR={jobdir}", "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False",
            "-s", "CONCURRENT_REQUESTS=8", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=4", "-s", "LOG_LEVEL=INFO",
            "-s", "NEARDUP_FRONTIER_LEASE=3", *more]


def kept(jobdir: Path) -> list[str]:
    path = jobdir / "neardup" / "index.sqlite3"
    if not path.exists():
        return []
    db = sqlite3.connect(path)
    try:
        return [u for (u,) in db.execute("SELECT url FROM pages")]
    finally:
        db.close()


def groups_kept(site: DupSite, urls: list[str]) -> dict[int, set[str]]:
    group_of = {p: gi for gi, g in enumerate(site.groups()) for p in g}
    out: dict[int, set[str]] = {gi: set() for gi in range(len(site.groups()))}
    for u in urls:
        path = "/" + u.split("/", 3)[3]
        assert path in group_of, f"a page that is no article was kept: {u}"
        out[group_of[path]].add(u)
    return out


@pytest.fixture
def shared_redis(redis_server):
    db = next(_dbs)
    redis_server.cli("-n", str(db), "flushdb")
    return f"redis://127.0.0.1:{redis_server.port}/{db}"


def run(cmds: list[list[str]], logs: list[Path]) -> list[subprocess.Popen]:
    procs = []
    for cmd, log in zip(cmds, logs):
        with open(log, "w") as fh:
            procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=fh))
    return procs


def finish(procs: list[subprocess.Popen], logs: list[Path], timeout: float = 300) -> None:
    """Wait for every crawl to end; one still running after ``timeout`` s (a hang) is killed, all of
    them, and the test fails with what each said last (its DEBUG lines left out), to find why."""
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        tails = []
        for log in logs:
            lines = [line for line in log.read_text(errors="replace").splitlines() if "] DEBUG: " not in line]
            tails.append(f"--- {log.name}, last lines:\n" + "\n".join(lines[-40:]))
        pytest.fail(f"a crawl was still running after {timeout:.0f} s:\n" + "\n".join(tails))


def crawl_from_home(server, shared_redis: str, tmp_path: Path, *more: str) -> list[str]:
    """Two processes sharing Redis crawl ``server``'s site from ``/`` to the end; their logs,
    each checked to have finished."""
    cmds = [[a if not a.startswith("start_url=") else f"start_url={server.url}/" for a in
             shared_cmd(server.url, shared_redis, tmp_path / f"p{i}", *more)] for i in range(2)]
    procs = run(cmds, [tmp_path / f"p{i}.log" for i in range(2)])
    finish(procs, [tmp_path / f"p{i}.log" for i in range(2)])
    logs = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
    for text in logs:
        assert "'finish_reason': 'finished'" in text, text[-3000:]
    return logs


class SecondProcessGate:
    """The site's ``delay``: an answer is held while requests wait in the shared queue and
    only one process holds any, until a second process has taken one (its in-flight hash
    exists), then never again. Two processes started together may start seconds apart on a
    busy machine, and one alone crawls this site in a few seconds: the second, turned away
    by the dupe filter at its start request, then found nothing queued, nothing in flight,
    and finished having kept nothing. Held here, the first process waits for the second with
    work queued for it; an empty queue holds nothing (the first process's answers bring it
    work), so the gate never stalls the crawl for good (and gives up after ``patience`` s)."""

    def __init__(self, site: DupSite, redis_url: str, spider: str = "site", patience: float = 120) -> None:
        import redis

        self.site, self.patience = site, patience
        self.client = redis.Redis.from_url(redis_url)
        self.queue, self.inflight = f"{{{spider}}}:requests", f"{{{spider}}}:requests:inflight:*"
        self.opened = threading.Event()
        self.held = 0  # answers that waited

    def holders(self) -> set[bytes]:
        """The processes holding requests: their in-flight hashes (the ``:answered`` and ``:stored`` sets
        beside each are the same process's: counted, one process alone opened the gate, crawled the
        whole site, and the other found nothing left)."""
        return {k for k in self.client.scan_iter(match=self.inflight)
                if not k.endswith((b":answered", b":stored"))}

    def delay(self, path: str) -> float:
        deadline = time.monotonic() + self.patience
        waited = False
        while not self.opened.is_set() and time.monotonic() < deadline:
            if len(self.holders()) >= 2:
                self.opened.set()
            elif self.client.zcard(self.queue) == 0:
                break
            else:
                waited = True
                time.sleep(0.02)
        self.held += waited
        return random.Random(path).uniform(*self.site.delay)


def test_two_processes_keep_what_one_keeps_and_fetch_nothing_twice(shared_redis, tmp_path):
    site = DupSite(n=60)
    gate = SecondProcessGate(site, shared_redis)
    with PageServer(site.page, gate.delay) as server:
        procs = run([shared_cmd(server.url, shared_redis, tmp_path / f"p{i}") for i in range(2)],
                    [tmp_path / f"p{i}.log" for i in range(2)])
        finish(procs, [tmp_path / f"p{i}.log" for i in range(2)])
        logs = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
        for text in logs:
            assert "'finish_reason': 'finished'" in text, text[-3000:]
        assert gate.opened.is_set(), "the second process never took a request"
        twice = {u: n for u, n in server.hits.items() if n > 1}
        assert not twice, f"fetched more than once: {twice}"
        # (each process downloaded pages: the work was shared. Which of them keeps pages depends on which
        # requests it took; a second process whose few requests were all duplicates kept none, under load)
        assert all((stat(text, "downloader/response_count") or 0) >= 1 for text in logs), \
            [stat(text, "downloader/response_count") for text in logs]
        both = [kept(tmp_path / f"p{i}") for i in range(2)]
        got = groups_kept(site, both[0] + both[1])
        assert all(len(urls) == 1 for urls in got.values()), \
            {g: u for g, u in got.items() if len(u) != 1}
        assert sum(map(len, both)) == len(site.groups())


@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_a_killed_process_loses_nothing(where, request, tmp_path):
    """Two processes share the frontier and the store, on one redis-server or on a Redis
    Cluster (scrapy-redis's client a ``RedisCluster``); one is killed with SIGKILL
    mid-crawl while it holds requests: the other reclaims them and finishes, every
    group kept once, no URL fetched more than twice."""
    url = request.getfixturevalue("shared_redis" if where == "redis" else "cluster_frontier")
    more = ["-s", f"REDIS_PARAMS={json.dumps(CLUSTER_PARAMS)}"] if where == "cluster" else []
    site = DupSite(n=60, delay=(0.03, 0.08))
    with site.serve() as server:
        cmds = [shared_cmd(server.url, url, tmp_path / f"p{i}", *more) for i in range(2)]
        logs = [tmp_path / f"p{i}.log" for i in range(2)]
        def wait_for_hits(n: int) -> None:
            deadline = time.monotonic() + 120
            while sum(server.hits.values()) < n and time.monotonic() < deadline:
                time.sleep(0.005)

        (victim,) = run(cmds[:1], logs[:1])
        wait_for_hits(15)
        (survivor,) = run(cmds[1:], logs[1:])
        wait_for_hits(30)
        workers = children(victim.pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        assert_gone(workers)
        finish([survivor], logs[1:])
        text = logs[1].read_text()
        assert "'finish_reason': 'finished'" in text, text[-3000:]
        if where == "cluster":
            assert "shared frontier on Redis Cluster: " in text, text[:3000]
        assert "'neardup/frontier/reclaimed'" in text, "the victim held no request when killed: " + text[-3000:]
        over = {u: n for u, n in server.hits.items() if n > 2}
        assert not over, f"fetched more than kills + 1 times: {over}"
        got = groups_kept(site, kept(tmp_path / "p0") + kept(tmp_path / "p1"))
        lost = [g for g, urls in got.items() if not urls]
        if lost:  # (what each process said of the lost pages, to tell a lost request from a lost row)
            paths = sorted({p for g in lost for p in site.groups()[g]})
            said = [line for log in logs for line in log.read_text().splitlines() if any(p in line for p in paths)]
            pytest.fail(f"groups kept by neither process: {lost}; fetches: "
                        f"{ {p: server.hits.get(p, 0) for p in paths} }; log lines: {said[:20]}")
        # a page the victim held when killed may be indexed by both (at-least-once across
        # processes), but always the same URL: never a second member of a group
        assert all(len(urls) == 1 for urls in got.values()), {g: u for g, u in got.items() if len(u) != 1}


@pytest.mark.parametrize("policy", ["pause", "pass"])
def test_a_store_outage_mid_crawl(policy, tmp_path):
    """Redis goes away for a few seconds mid-crawl and comes back: with
    "pause" the pages wait and the crawl ends as it would have; with "pass"
    they go through unchecked and are counted. The crawl finishes either way."""
    from tests.fixtures.redis_servers import RedisServer, available

    if (why := available()) is not None:
        pytest.skip(why)
    redis = RedisServer(workdir=tmp_path / "redis")
    site = DupSite(n=60, delay=(0.15, 0.25))
    try:
        with site.serve() as server:
            jobdir = tmp_path / "job"
            cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", "site",
                   "-a", f"start_url={server.url}/a/0.html", "-s", f"JOBDIR={jobdir}",
                   "-s", f"NEARDUP_STORE={redis.url}?prefix=outage", "-s", f"NEARDUP_STORE_UNAVAILABLE={policy}",
                   "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False", "-s", "CONCURRENT_REQUESTS=2",
                   "-s", "LOG_LEVEL=INFO"]
            (proc,) = run([cmd], [tmp_path / "crawl.log"])
            deadline = time.monotonic() + 120
            while sum(server.hits.values()) < 10 and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(1.1)  # (appendfsync everysec: what was stored before the outage stays)
            redis.stop()
            time.sleep(3)
            redis.start()
            finish([proc], [tmp_path / "crawl.log"])
            text = (tmp_path / "crawl.log").read_text()
            assert "'finish_reason': 'finished'" in text, text[-3000:]
            assert "'neardup/store_outages'" in text and "is back after" in text, text[-3000:]
            got = groups_kept(site, kept(jobdir))
            if policy == "pause":
                assert "neardup/skipped/store_unavailable" not in text
                assert all(len(urls) == 1 for urls in got.values()), {g: u for g, u in got.items() if len(u) != 1}
            else:
                assert "'neardup/skipped/store_unavailable'" in text, text[-3000:]
            assert all(got.values()), "every group is in the index"
    finally:
        redis.close()


def test_an_outage_longer_than_the_lease_takes_no_live_processs_requests(tmp_path):
    """Redis (the frontier and the store) goes away for more than NEARDUP_FRONTIER_LEASE while two
    processes crawl. Every heartbeat is then stale, but both processes are alive: the first to see
    Redis back used to take the other's requests, and both emitted those pages. Each outage is said
    and counted once (the frontier said "Redis is back" every second while it was down)."""
    from tests.fixtures.redis_servers import RedisServer, available

    if (why := available()) is not None:
        pytest.skip(why)
    redis = RedisServer(workdir=tmp_path / "redis")
    site = DupSite(n=60, delay=(0.1, 0.2))
    try:
        gate = SecondProcessGate(site, redis.url)
        with PageServer(site.page, gate.delay) as server:
            feeds = [tmp_path / f"f{i}.jsonl" for i in range(2)]
            cmds = [shared_cmd(server.url, redis.url, tmp_path / f"p{i}", "-o", str(feeds[i]), "-s", "STATS_DUMP=True")
                    for i in range(2)]
            logs = [tmp_path / f"p{i}.log" for i in range(2)]
            procs = run(cmds, logs)
            deadline = time.monotonic() + 120
            while not (gate.opened.is_set() and sum(server.hits.values()) >= 15) and time.monotonic() < deadline:
                time.sleep(0.005)
            assert gate.opened.is_set(), "the second process never took a request"
            time.sleep(1.1)  # (appendfsync everysec: what was stored before the outage stays)
            redis.stop()
            time.sleep(7)  # (the lease is 3 s)
            redis.start()
            finish(procs, logs)
        texts = [log.read_text() for log in logs]
        for text in texts:
            assert "'finish_reason': 'finished'" in text, text[-3000:]
            assert "held by a process that stopped beating" not in text, text[-3000:]
            assert text.count("shared frontier: Redis is back") <= 1, text[-3000:]
            assert "'neardup/frontier/redis_outages': 1," in text, text[-3000:]
        urls = [json.loads(line)["url"] for f in feeds for line in f.read_text().splitlines()]
        assert len(urls) == len(set(urls)), f"emitted twice: {sorted(u for u in set(urls) if urls.count(u) > 1)}"
        got = groups_kept(site, kept(tmp_path / "p0") + kept(tmp_path / "p1"))
        assert all(len(u) == 1 for u in got.values()), {g: u for g, u in got.items() if len(u) != 1}
    finally:
        redis.close()


#: scrapy-redis's settings for a frontier on a Redis Cluster: its client made as a Cluster client
CLUSTER_PARAMS = {"redis_cls": "redis.cluster.RedisCluster"}


def open_frontier(request, where: str, spider_name: str):
    """(crawler, its shared frontier opened) on the session's Redis (``where`` "redis") or Redis Cluster
    ("cluster", scrapy-redis's client made a ``RedisCluster`` with ``REDIS_PARAMS``), for a spider named
    ``spider_name``."""
    from scrapy import Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.addon import REDIS_SETTINGS

    url = request.getfixturevalue("shared_redis" if where == "redis" else "cluster_frontier")
    more = {"REDIS_PARAMS": CLUSTER_PARAMS} if where == "cluster" else {}
    crawler = get_crawler(Spider, {**REDIS_SETTINGS, "REDIS_URL": url, **more})
    crawler.spider = spider = Spider.from_crawler(crawler, spider_name)
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    return crawler, scheduler


@pytest.fixture
def cluster_frontier(redis_cluster) -> str:
    """``REDIS_URL`` of the session's Redis Cluster, emptied (the frontier's keys are the spider's)."""
    from redis.cluster import RedisCluster

    client = RedisCluster.from_url(redis_cluster.url)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    client.close()
    return redis_cluster.url.split("?", 1)[0]


def test_two_processes_learn_and_use_one_set_of_url_rules(shared_redis, tmp_path):
    """The trap site by two processes sharing Redis: the URL rules live beside
    the store, both act on them, and no avoided URL had other content."""
    from scrapy_neardup.crawler.url_rules.book import ACTIVE, list_rules
    from tests.fixtures.trap_site import TrapSite

    site = TrapSite(n=40)
    with site.serve() as server:
        logs = crawl_from_home(server, shared_redis, tmp_path, "-s", "CONCURRENT_REQUESTS=2")
        fetched = {site.truth(t) for t in server.requests}
    avoided = [json.loads(line) for i in range(2)
               for line in (tmp_path / f"p{i}" / "neardup" / "duplicates.jsonl").read_text().splitlines()
               if '"avoided"' in line]
    assert avoided, "no request was avoided"

    def target(u: str) -> str:
        return "/" + u.split("/", 3)[3]

    assert all(site.truth(target(a["url"])) == site.truth(target(a["duplicate_of"])) for a in avoided)
    assert {f"doc {i}" for i in range(site.n)} <= fetched
    rules = list_rules(f"{shared_redis}?prefix=neardup")
    assert any(r["state"] == ACTIVE for r in rules), rules
    if not any("'neardup/url_rules/retired'" in text for text in logs):  # (a retired rule's URLs may come again)
        assert len({a["url"] for a in avoided}) == len(avoided), "an avoided URL counted by both processes"


def test_a_cluster_node_without_a_cluster_client_is_refused_at_start(cluster_frontier, tmp_path):
    """REDIS_URL at a node of a Redis Cluster without scrapy-redis's REDIS_PARAMS: the plain client
    meets MOVED for another node's keys (tracebacks mid-crawl, or a crawl on one node by luck):
    one error at the start, naming the setting."""
    r = subprocess.run(shared_cmd("http://127.0.0.1:9", cluster_frontier, tmp_path / "job"), cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stderr[-3000:]
    assert "ConfigError: REDIS_URL points at a node of a Redis Cluster: set REDIS_PARAMS" in r.stderr, r.stderr[-3000:]
    assert r.stderr.count("Traceback") == 1 and "Spider opened" not in r.stderr, r.stderr[-5000:]


def test_a_retired_shared_rules_requests_are_requeued_on_a_redis_cluster(cluster_frontier, tmp_path):
    """The same site and two processes with the frontier, the store and the rule book on a Redis Cluster
    (scrapy-redis's client a ``RedisCluster``, ``REDIS_PARAMS``): a claim and a push cannot be one step
    there (the book's keys and the queue's are in other slots), so each of the retired rule's avoided
    requests is queued under a mark with the dupe filter's (one step in the queue's slot), then let go by
    the book. Every content is fetched and none twice; the requests were made after all."""
    from tests.fixtures.trap_site import CopiesSite

    site = CopiesSite()
    with site.serve() as server:
        logs = crawl_from_home(server, cluster_frontier, tmp_path, "-s", f"REDIS_PARAMS={json.dumps(CLUSTER_PARAMS)}")
        hits = {t: n for t, n in server.hits.items() if t != "/robots.txt"}
    assert all("shared frontier on Redis Cluster: " in text for text in logs)
    assert site.contents() <= {site.truth(t) for t in hits}
    assert any("'neardup/url_rules/retired'" in text for text in logs)
    made = [line for text in logs for line in text.splitlines() if "request(s) it avoided are made after all" in line]
    assert made and sum(int(line.split(" retired: ")[1].split()[0]) for line in made) > 0, made
    assert all("each queued under a mark, then let go" in line for line in made), made
    twice = sorted(t for t, n in hits.items() if n > 1)
    assert not twice, f"fetched twice: {twice[:10]}"


def test_a_retired_shared_rules_requests_are_claimed_and_queued_in_one_step(shared_redis, tmp_path):
    """The 400-page site with session ids whose sid rule is retired on its last pages, by two
    processes sharing Redis (the rule book and the frontier on one server): the retired rule's
    avoided requests are claimed from the book and queued in one step, by one process; every
    content is fetched and none of them twice."""
    from tests.fixtures.trap_site import CopiesSite

    site = CopiesSite()
    with site.serve() as server:
        logs = crawl_from_home(server, shared_redis, tmp_path)
        hits = {t: n for t, n in server.hits.items() if t != "/robots.txt"}
    assert site.contents() <= {site.truth(t) for t in hits}
    assert any("'neardup/url_rules/retired'" in text for text in logs)
    claimed = [line for text in logs for line in text.splitlines() if "queued in one step" in line]
    assert claimed and sum(int(line.split(" retired: ")[1].split()[0]) for line in claimed) > 0, claimed
    twice = sorted(t for t, n in hits.items() if n > 1)
    assert not twice, f"fetched twice: {twice[:10]}"




@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_the_dupe_filters_mark_and_the_push_are_one_step(where, request):
    """A request is marked seen in scrapy-redis's dupe filter and queued in one server-side
    step: a kill between two separate commands left a request marked and never queued, and its
    parent, fetched again, could not queue it either (a page lost by a shared crawl). On a Redis
    Cluster (scrapy-redis's client made a ``RedisCluster`` with ``REDIS_PARAMS``), the queue's and
    the dupe filter's keys share the hash tag ``{spider}``: one slot, so the same one step."""
    from scrapy import Request

    crawler, scheduler = open_frontier(request, where, "one_step")
    try:
        assert type(scheduler.server).__name__ == ("RedisCluster" if where == "cluster" else "Redis")
        assert scheduler._seen_push is not None, "the add-on's dupe filter is marked in the push's step"
        for u in ("http://127.0.0.1/a", "http://127.0.0.1/b", "http://127.0.0.1/a"):
            scheduler.enqueue_request(Request(u))
        scheduler.enqueue_request(Request("http://127.0.0.1/a", dont_filter=True))
        client = scheduler.server
        assert client.zcard("{one_step}:requests") == 3  # /a, /b, and /a again unfiltered
        assert client.scard("{one_step}:dupefilter") == 2
        assert crawler.stats.get_value("scheduler/enqueued/redis") == 3
        # what was queued comes out, through the in-flight hash (the pop's own step, in the same slot)
        got = [scheduler.next_request() for _ in range(4)]
        assert sorted(r.url for r in got[:3]) == ["http://127.0.0.1/a", "http://127.0.0.1/a", "http://127.0.0.1/b"]
        assert got[3] is None and client.hlen(scheduler.inflight_key) == 3
    finally:
        scheduler.close("finished")


@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_a_request_counts_a_death_only_once_its_server_answered(where, request):
    """A process's requests go back to the queue when it dies (or hands them back as it closes); each
    counted against the give-up limit, so a request that waited out DOWNLOAD_DELAY at every death was given
    up after NEARDUP_FRONTIER_MAX_REDELIVERIES + 1 of them, never sent. Only those its server answered count
    a kill, and only one that had stored its page is handed out to be emitted again (its outputs may be half
    committed; the others produced nothing), at every life until it is done."""
    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.addon import REDIS_SETTINGS

    url = request.getfixturevalue("shared_redis" if where == "redis" else "cluster_frontier")
    more = {"REDIS_PARAMS": CLUSTER_PARAMS} if where == "cluster" else {}
    urls = [f"http://127.0.0.1/{name}" for name in ("stored", "answered", "waiting", "raced")]
    emitted = {}
    for life in range(3):
        crawler = get_crawler(Spider, {**REDIS_SETTINGS, "REDIS_URL": url, **more})
        crawler.spider = spider = Spider.from_crawler(crawler, "answered")
        scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
        scheduler.open(spider)
        try:
            if life == 0:
                for u in urls:
                    scheduler.enqueue_request(Request(u))
            got = {r.url: r for r in (scheduler.next_request() for _ in urls)}
            emitted[life] = sorted(u for u, r in got.items() if r.meta.get("neardup_emit_again"))
            for u in urls[:2]:
                scheduler.tracker.reached(got[u].meta["neardup_frontier_id"])
            if life == 0:  # (its page stored as new in the first life only: the mark stays until it is done)
                assert scheduler.tracker.storing(got[urls[0]].meta["neardup_frontier_id"])
                raced = got[urls[3]].meta["neardup_frontier_id"]  # (marked, then another process stored it first)
                assert scheduler.tracker.storing(raced)
                scheduler.tracker.stored_nothing(raced)
        finally:
            scheduler.close("shutdown")  # (its requests go back to the queue, as at a death)
    assert emitted == {0: [], 1: [urls[0]], 2: [urls[0]]}
    client = scheduler.server
    kills = {k.decode(): int(v) for k, v in client.hgetall(scheduler.kills_key).items()}
    assert sorted(kills.values()) == [3, 3]  # (the two answered requests: a kill at each of the three closes)
    # (each set went with its hash)
    assert not [k for k in client.keys("*") if b"inflight" in k and (b"answered" in k or b"stored" in k)]


class Killed(BaseException):
    """A kill at a chosen moment (not an ``Exception``: nothing on the way catches it)."""


@pytest.mark.parametrize("moment", ["before the push", "after the push"])
@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_a_retired_rules_requests_are_queued_once_across_a_kill_when_the_book_is_not_on_the_frontiers_server(
        where, moment, request, tmp_path):
    """The shared frontier on a Redis Cluster with the rule book on it too (other slots than the queue's), or
    on one Redis with the book in a file: a claim and a push cannot be one step. The retired rule's avoided
    requests are queued each under a mark in the queue's slot, with the dupe filter's mark (``push_marked``),
    and only then let go by the book. Killed before the push, they are in the book; killed after it, in the
    book and queued, and the marks make the resume's queueing them again (``unreleased``) nothing: each is
    queued once, and one the dupe filter had seen (reached by an ordinary link meanwhile) not at all.
    (Claimed from the book first, as before, a kill before the push lost them.)"""
    from types import SimpleNamespace

    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.addon import REDIS_SETTINGS
    from scrapy_neardup.crawler.config import NearDupConfig
    from scrapy_neardup.crawler.filter.duplicates_log import DuplicatesLog
    from scrapy_neardup.crawler.filter.learned_rules import LearnedRules
    from scrapy_neardup.crawler.frontier.codec import decode_request

    h = "http://h.test"
    url = request.getfixturevalue("shared_redis" if where == "redis" else "cluster_frontier")
    book = request.getfixturevalue("redis_cluster_url") if where == "cluster" else str(tmp_path / "rules.sqlite3")
    more = {"REDIS_PARAMS": CLUSTER_PARAMS} if where == "cluster" else {}
    crawler = get_crawler(Spider, {**REDIS_SETTINGS, "REDIS_URL": url, **more, "NEARDUP_URL_RULES_FILE": book,
                                   "NEARDUP_URL_RULES_MIN_EVIDENCE": 2, "NEARDUP_URL_RULES_EXPLORE": 0.0,
                                   "NEARDUP_DUPLICATES_FILE": str(tmp_path / "d.jsonl")})
    crawler.spider = spider = Spider.from_crawler(crawler, "requeue")
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    crawler.engine = SimpleNamespace(_slot=SimpleNamespace(scheduler=scheduler),  # (what _requeue looks up)
                                     crawl=lambda r: scheduler.enqueue_request(r))
    config = NearDupConfig.from_settings(crawler.settings)

    def learned_rules() -> LearnedRules:
        return LearnedRules(crawler, config, DuplicatesLog(crawler, config.duplicates_file))

    try:
        rules = learned_rules()
        for i in range(3):
            rules.learn(f"{h}/a{i}.html", 1000 + i)
            rules.learn(f"{h}/a{i}.html?sid={i}", 1000 + i, duplicate_of=f"{h}/a{i}.html")
        assert len(rules.avoided([Request(f"{h}/a{i}.html?sid=x") for i in range(3)], f"{h}/")) == 3
        scheduler.enqueue_request(Request(f"{h}/a1.html?sid=x"))  # (reached by an ordinary link meanwhile)

        def kill(*args: object) -> None:
            raise Killed

        if moment == "before the push":
            scheduler.push_marked = scheduler.enqueue_request = kill
        else:
            rules.book.forget = kill  # type: ignore[method-assign]  # (queued, before the book lets go)
        with pytest.raises(Killed):
            rules.learn(f"{h}/a2.html?sid=other", 1 << 50)  # a counter-example: the sid rule is retired
        if moment == "before the push":
            del scheduler.push_marked, scheduler.enqueue_request  # (what the resumed crawl has: the class's)
        queue = "{requeue}:requests"
        assert scheduler.server.zcard(queue) == (1 if moment == "before the push" else 3)
        if where == "redis":
            rules.book.store.db.close()  # type: ignore[attr-defined]  # (killed: nothing more committed)
        again = learned_rules()  # the resumed crawl
        assert [st.rule.spec for st in again.book.unreleased()] == ["param h.test sid"]
        again._resume()
        assert sorted(decode_request(x.decode(), spider).url  # each once
                      for x in scheduler.server.zrange(queue, 0, -1)) == [f"{h}/a{i}.html?sid=x" for i in range(3)]
        assert again.book.unreleased() == []
        again.close()
    finally:
        scheduler.close("finished")


@pytest.mark.parametrize("where", ["redis", "cluster"])
def test_a_pop_whose_answer_was_lost_hands_out_the_request_it_moved(where, request):
    """Redis stopped (or the connection broke) after the pop had moved a request to this process's
    in-flight hash and before its answer came back. That request was held by a live process that never
    got it: its heartbeat kept it from every other process, and both crawls waited for it for ever (a
    shared crawl hung after an outage). The next pop asks again with the same id and gets that request;
    so does a pop sent twice (redis-py resends on a broken connection), never a second one over the first."""
    import redis as redis_py
    from scrapy import Request

    crawler, scheduler = open_frontier(request, where, "lost_answer")
    pop = scheduler._pop
    try:
        for u in ("http://127.0.0.1/a", "http://127.0.0.1/b", "http://127.0.0.1/c"):
            scheduler.enqueue_request(Request(u))

        def answer_lost(**kw):
            pop(**kw)
            raise redis_py.ConnectionError("Connection closed by server.")

        scheduler._pop = answer_lost
        assert scheduler.next_request() is None
        client = scheduler.server
        assert client.hlen(scheduler.inflight_key) == 1  # (moved, and this process does not know it)
        scheduler._pop = lambda **kw: (pop(**kw), pop(**kw))[1]  # (sent twice: the same request both times)
        first = scheduler.next_request()
        scheduler._pop = pop
        rest = [scheduler.next_request() for _ in range(3)]
        assert sorted(r.url for r in [first, *rest[:2]]) == [f"http://127.0.0.1/{c}" for c in "abc"]
        assert rest[2] is None
        assert client.hlen(scheduler.inflight_key) == 3
        assert sorted(client.hkeys(scheduler.inflight_key)) == sorted(
            str(r.meta["neardup_frontier_id"]).encode() for r in [first, *rest[:2]])
    finally:
        scheduler._pop = pop
        scheduler.close("shutdown")


def test_a_request_dropped_at_its_pop_while_redis_fails_is_acknowledged_later(request):
    """An unreadable request is dropped as it is popped, and acknowledged; Redis failing right then
    raised into the engine, and the request stayed in this live process's in-flight hash: the crawl
    never ended. It waits with the others for the next checkpoint, and the data's hash goes with it
    (sent empty, the request's redelivery and kill counts stayed for an identical one queued later)."""
    import redis as redis_py

    crawler, scheduler = open_frontier(request, "redis", "ack_later")
    ack = scheduler._ack
    try:
        client = scheduler.server
        client.zadd(scheduler.queue.key, {b"not a request": 0})
        client.hset(scheduler.redelivered_key, hashlib.sha1(b"not a request").hexdigest(), 2)
        sent = []

        def refused(**kw):
            sent.append(kw["args"])
            raise redis_py.ConnectionError("Connection refused.")

        scheduler._ack = refused
        assert scheduler.next_request() is None  # (not raised)
        assert client.hlen(scheduler.inflight_key) == 1 and scheduler._unacked
        scheduler._ack = ack
        scheduler._acknowledge()
        assert client.hlen(scheduler.inflight_key) == 0 and not scheduler._unacked
        assert client.hlen(scheduler.redelivered_key) == 0
        assert crawler.stats.get_value("neardup/frontier/corrupt") == 1
    finally:
        scheduler._ack = ack
        scheduler.close("shutdown")


def test_a_storing_mark_redis_refuses_is_the_stores_outage_not_a_held_page(shared_redis):
    """The shared frontier's Redis gone between the store's answer and the mark: the page was held, left in
    this process's in-flight hash while it ran, and the crawl never ended. It is now ``StoreUnavailable``,
    waited out or passed unchecked as ``NEARDUP_STORE_UNAVAILABLE`` says."""
    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.addon import REDIS_SETTINGS
    from scrapy_neardup.dedup.store import StoreUnavailable

    crawler = get_crawler(Spider, {**REDIS_SETTINGS, "REDIS_URL": shared_redis})
    crawler.spider = spider = Spider.from_crawler(crawler, "refused")
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    try:
        scheduler.enqueue_request(Request("http://127.0.0.1/page"))
        rid = scheduler.next_request().meta["neardup_frontier_id"]

        def refused(*args):
            raise ConnectionError("Redis went away")

        scheduler.server.sadd = refused
        with pytest.raises(StoreUnavailable, match="Redis went away"):
            scheduler.tracker.storing(rid)
    finally:
        del scheduler.server.sadd
        scheduler.close("shutdown")


def test_a_note_one_process_makes_is_read_by_another(shared_redis):
    """``AckTracker.note`` on the shared frontier: which callbacks a start page was stored for, noted by the
    process that stored it, is what another process asks when the site's link back to that page comes to
    it (a ``CrawlSpider``'s start page gives its rule's item there). Read by prefix: a URL that begins
    another's is not that one."""
    from scrapy import Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.addon import REDIS_SETTINGS

    schedulers = []
    for _ in range(2):
        crawler = get_crawler(Spider, {**REDIS_SETTINGS, "REDIS_URL": shared_redis})
        crawler.spider = spider = Spider.from_crawler(crawler, "noting")
        scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
        scheduler.open(spider)
        schedulers.append(scheduler)
    one, other = (s.tracker for s in schedulers)
    try:
        one.note('callback http://h/a\n["parse", null]')
        one.note('callback http://h/ab\n["_callback", 0]')
        other.note('callback http://h/a\n["_callback", 0]')
        assert other.notes("callback http://h/a\n") == ['callback http://h/a\n["_callback", 0]',
                                                        'callback http://h/a\n["parse", null]']
        assert one.notes("callback http://h/é\n") == []
    finally:
        for scheduler in schedulers:
            scheduler.close("finished")
        schedulers[0].server.delete(schedulers[0].notes_key)
