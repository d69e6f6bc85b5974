"""What pages do while the filter's worker process first starts (issue 26,
part 2): nothing stalls the crawl's thread then either. A small page is
fingerprinted in the crawl's thread (the start of a crawl keeps moving); one
past ``START_PATH_MAX_BYTES`` waits in the queue for the worker, and is
answered ``no_worker`` (it passes unchecked) if the workers never come up or
the crawl closes first.

The worker is held back by ``tests/fixtures/worker_gate`` (its
``sitecustomize``, on ``PYTHONPATH``: a worker process waits for a file the
test writes once the log says the big page waits), so that the big page
surely arrives before the worker is up, however fast or busy the machine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from scrapy_neardup.crawler.filter.workers import MAX_WORKER_RESTARTS, START_PATH_MAX_BYTES
from scrapy_neardup.dedup.text.hostile_scan import MAX_ATTRIBUTES, hostile_reason
from tests.conftest import ROOT
from tests.fixtures.http import PageServer
from tests.test_crawl import WORKER_UP, read_jsonl, scrapy_crawl, stat, wait_for_line
from tests.test_hostile_site import LAG_BOUND, PROBE, _normal_page

GATE_DIR = ROOT / "tests" / "fixtures" / "worker_gate"
WAITS = "waits for the worker process to start"
N_NORMAL = 10
#: The big page: elements of as many attributes each as the pre-parse scan lets through, some 2 MB:
#: seconds of the reference path's time (bench/start_path.py: ~0.37 s a MB of thread CPU, more when busy)
BIG_ELEMENTS = 300


def _big_page() -> bytes:
    tag = b"<div " + b" ".join(b"a%d" % i for i in range(MAX_ATTRIBUTES)) + b">"
    return (b"<html><body>" + tag * BIG_ELEMENTS + b"<p>" + b"a big page of elements of very many attributes " * 10
            + b"</p></body></html>")


def _site():
    big = _big_page()
    assert len(big) > START_PATH_MAX_BYTES and hostile_reason(big) is None
    normal = {f"/page-{i}.html": _normal_page(i) for i in range(N_NORMAL)}
    # the big page among the first: linked from the start page, ahead of the others
    links = "".join(f'<a href="{p}">{p}</a> ' for p in ["/big.html", *normal])
    start = (f"<html><head><title>Start</title></head><body><p>Where the crawl starts, with a big page among "
             f"its first links and words enough to be fingerprinted itself.</p>{links}</body></html>").encode()
    html = {"Content-Type": "text/html; charset=utf-8"}

    def page(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/big.html":
            return 200, html, big
        return 200, html, normal.get(path, start)

    return normal, page


def _open_the_gate_when(log: Path, gate: Path, text: str, then: str) -> threading.Thread:
    """Write ``then`` into ``gate`` once the log has ``text`` (or after the wait's patience)."""
    def run() -> None:
        wait_for_line(log, text)
        gate.write_text(then)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def gated(monkeypatch, tmp_path):
    """The gate file (not there yet) that holds back the crawl's worker processes."""
    gate = tmp_path / "gate"
    monkeypatch.setenv("PYTHONPATH", str(GATE_DIR))
    monkeypatch.setenv("NEARDUP_TEST_WORKER_GATE", str(gate))
    return gate


def test_a_big_page_that_arrives_before_the_worker_waits_for_it(gated, tmp_path):
    normal, page = _site()
    log_path = tmp_path / "crawl.log"
    opener = _open_the_gate_when(log_path, gated, f"/big.html ({len(_big_page())} bytes) {WAITS}", "go")
    with PageServer(page) as server:
        r = scrapy_crawl(f"{server.url}/start.html", tmp_path, PROBE, "NEARDUP_WORKERS=1",
                         "NEARDUP_WORKER_TIMEOUT=120", log=log_path)
    opener.join(1)
    log = r.stderr
    assert r.returncode == 0 and "'finish_reason': 'finished'" in log, log[-4000:]
    assert "Traceback" not in log and " ERROR: " not in log, log[-4000:]
    assert WORKER_UP in log, log[-4000:]
    # every page crawled and kept, the big one too
    got = {i["url"][len(server.url):] for i in read_jsonl(tmp_path / "pages.jsonl")}
    assert got == set(normal) | {"/start.html", "/big.html"}
    assert stat(log, "neardup/kept") == len(got)
    # the big page waited for the worker (named in the log, before the worker was up); the start page
    # at least was fingerprinted in the crawl's thread, and the worker read the big page's links
    assert stat(log, "neardup/waited_for_worker") == 1, log[-4000:]
    assert log.index(WAITS) < log.index(WORKER_UP)
    assert (stat(log, "neardup/fingerprinted_while_workers_start") or 0) >= 1
    assert (stat(log, "neardup/links/from_worker") or 0) >= 1
    assert stat(log, "neardup/skipped") is None
    lag = stat(log, "lag_probe/max_ms")
    print(f"crawl's thread at most {lag} ms late")
    assert lag is not None and lag < LAG_BOUND * 1000, (lag, log[-3000:])


def test_a_page_waiting_for_workers_that_never_start_passes_unchecked(gated, tmp_path):
    normal, page = _site()
    log_path = tmp_path / "crawl.log"
    opener = _open_the_gate_when(log_path, gated, WAITS, "fail")  # every worker then ends as it starts
    with PageServer(page) as server:
        r = scrapy_crawl(f"{server.url}/start.html", tmp_path, "NEARDUP_WORKERS=1", log=log_path)
    opener.join(1)
    log = r.stderr
    assert r.returncode == 0 and "'finish_reason': 'finished'" in log, log[-4000:]
    assert WORKER_UP not in log
    got = {i["url"][len(server.url):] for i in read_jsonl(tmp_path / "pages.jsonl")}
    assert got == set(normal) | {"/start.html", "/big.html"}  # nothing lost: unchecked pages still go on
    assert stat(log, "neardup/waited_for_worker") == 1
    # the workers failed to start: the filter stopped checking, loudly; the waiting page passed unchecked
    assert log.count("a worker process did not start") == MAX_WORKER_RESTARTS + 1, log[-4000:]
    assert "the filter STOPS CHECKING" in log
    assert stat(log, "neardup/workers_stopped") == 1
    assert (stat(log, "neardup/skipped/no_worker") or 0) >= 1


SCRIPT = textwrap.dedent('''
    import asyncio
    import sys
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler
    from scrapy_neardup.crawler.middleware import NearDupMiddleware
    from tests.test_worker_start import _big_page

    crawler = get_crawler(settings_dict={"NEARDUP_WORKERS": 1})
    crawler.stats.open_spider()
    mw = NearDupMiddleware.from_crawler(crawler)
    big = HtmlResponse("http://127.0.0.1/big.html", body=_big_page(), request=Request("http://127.0.0.1/big.html"))
    mw.process_spider_input(big)
    pending = mw._pending[big]
    print("waits:", type(pending).__name__, mw.workers.up.is_set())
    mw.spider_closed("finished")   # the worker never came up
    print("at close:", pending.result(timeout=0))
    print("answered:", asyncio.run(mw._fingerprint(big)))
    print("no_worker:", crawler.stats.get_value("neardup/skipped/no_worker", 0))
    with open(sys.argv[1], "w") as gate:  # (let the held worker end)
        gate.write("fail")
''')


def test_a_page_waiting_at_close_is_answered(gated):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(gated)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == ["waits: Future False", "at close: no_worker", "answered: no_worker",
                                     "no_worker: 1"]
    assert "1 page(s) still waiting for a worker process at the close pass unchecked" in r.stderr


def test_the_crawls_process_loads_the_stores_kernels_only_for_a_store_big_enough(monkeypatch):
    """The warm-up's wait (``FingerprintWorkers._wait_for_store_kernels``): the store's
    kernels are loaded in the crawl's process once its store holds ``STORE_KERNELS_FROM``
    fingerprints (and a worker has cached them); a crawl that ends smaller, or a shared
    store, never loads them (the warm-up is told False and warms nothing)."""
    import scrapy_neardup.crawler.filter.workers as workers
    from scrapy_neardup.crawler.config import NearDupConfig

    monkeypatch.setattr(workers, "STORE_KERNELS_FROM", 3)
    monkeypatch.setattr(workers.jit, "defer", lambda *groups: None)  # (this test process's kernels stay ready)
    monkeypatch.setattr(workers, "STORE_SIZE_POLL", 0.0)  # (the poll's pause: the test moves the size)
    w = workers.FingerprintWorkers(NearDupConfig(), None)  # type: ignore[arg-type]  # (no stats are written here)
    w._store_cached.set()  # (as a worker does once the kernels are in the cache)
    sizes = iter([0, 1, 2, 3])
    w._store_size = lambda: next(sizes)
    assert w._wait_for_store_kernels() is True  # (at the fourth look: 3 fingerprints)
    w._store_size = lambda: 2
    w._closing.set()
    assert w._wait_for_store_kernels() is False  # the crawl ended first
    w._closing.clear()
    w._store_size = None
    assert w._wait_for_store_kernels() is False  # a shared store: its look-ups run on Redis
    # and the warm-up thread warms nothing when told False
    ran: list[str] = []
    monkeypatch.setattr(workers.jit, "warm", lambda g: ran.append(g) or 0.0)
    thread = workers.jit.warm_in_background(("store",), wait=lambda: False, done=lambda: ran.append("done"))
    thread.join(10)
    assert ran == []
