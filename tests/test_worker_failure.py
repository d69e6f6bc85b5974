"""The crawl goes on when a fingerprinting worker process dies or overruns
its time budget (issue 26, part 2): the worker is replaced, its page passes
unchecked and is never fingerprinted in the crawl's thread; past
``MAX_WORKER_RESTARTS`` the filter stops checking, loudly. Run in
subprocesses, which install the asyncio reactor that the workers need.

A worker is made to hold a page by stopping it (SIGSTOP) before the page is
handed to it, so that no test depends on how long a page takes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from scrapy_neardup.crawler.demo_site import DemoSite
from scrapy_neardup.crawler.filter.workers import MAX_WORKER_RESTARTS
from scrapy_neardup.dedup.text.hostile_scan import MAX_ATTRIBUTES, hostile_reason
from tests.conftest import ROOT
from tests.fixtures.http import PageServer
from tests.test_crawl import WORKER_UP, paths, read_jsonl, scrapy_crawl, stat, wait_for_line

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="stops and kills workers with POSIX signals")

SCRIPT = textwrap.dedent('''
    import asyncio
    import atexit
    import os
    import signal
    import time
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler
    from scrapy_neardup.crawler.filter import workers as workers_module
    from scrapy_neardup.crawler.middleware import NearDupMiddleware

    workers_module.MAX_PAGES_LOST = __LOST__
    crawler = get_crawler(settings_dict={"NEARDUP_WORKERS": 1, "NEARDUP_WORKER_TIMEOUT": __TIMEOUT__})
    crawler.stats.open_spider()
    mw = NearDupMiddleware.from_crawler(crawler)
    workers = mw.workers

    def page(name):
        body = ("<html><body><p>" + f"near duplicate detection for web crawling, page {name} " * 20
                + "</p></body></html>").encode()
        return HtmlResponse(f"http://127.0.0.1/{name}.html", body=body, request=Request(f"http://127.0.0.1/{name}.html"))

    def outcome(response):
        mw.process_spider_input(response)
        pending = mw._pending[response]
        got = asyncio.run(mw._fingerprint(response))
        return type(pending).__name__, got if isinstance(got, str) else type(got).__name__

    def live_worker(not_pid=None, probes=0):
        """The live worker's pid (a new one, not ``not_pid``: wait for the replacement, and for its
        answer to the probe page, ``probes`` in all: a worker stopped during its probe is replaced)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pids = workers.worker_pids()
            if pids and pids[0] != not_pid and workers.probes_answered >= probes:
                return pids[0]
            time.sleep(0.05)
        raise SystemExit("no worker")

    stopped = []  # (a stopped worker never ends by itself, nor lets go of the test's stderr: kill it at exit)

    @atexit.register
    def kill_the_stopped():
        for p in stopped:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

    assert workers.up.wait(120)
    pid = live_worker()
    print("first:", *outcome(page("first")))
    for i in range(__ROUNDS__):
        probes = workers.probes_answered + (0 if __KILL__ else 1)  # (a worker out of time: its replacement probed)
        os.kill(pid, signal.SIGSTOP)            # the worker will hold the next page
        stopped.append(pid)
        held = page(f"held-{i}")
        mw.process_spider_input(held)
        if __KILL__:
            time.sleep(0.2)
            os.kill(pid, signal.SIGKILL)
        print("held:", asyncio.run(mw._fingerprint(held)))
        if not workers.stopped:
            pid = live_worker(not_pid=pid, probes=probes)
            if __AFTER__:
                print("after:", *outcome(page(f"after-{i}")))   # the replacement serves the next page
    print("later:", *outcome(page("later")))
    print("in the crawl's thread:", crawler.stats.get_value("neardup/fingerprinted_while_workers_start", 0))
    mw.spider_closed("finished")
    for name in ("worker_restarts", "workers_stopped", "skipped/worker_died", "skipped/timeout", "skipped/no_worker"):
        print(f"{name}:", crawler.stats.get_value(f"neardup/{name}", 0))
''')


def _run(rounds: int, kill: bool, timeout: float, after: bool = True, lost: int = 20) -> subprocess.CompletedProcess:
    script = (SCRIPT.replace("__TIMEOUT__", repr(timeout)).replace("__ROUNDS__", str(rounds))
              .replace("__KILL__", str(kill)).replace("__AFTER__", str(after)).replace("__LOST__", str(lost)))
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_a_dead_worker_is_replaced_and_past_the_limit_in_a_row_the_filter_stops_checking():
    """Deaths in a row, no page answered between them (the machine kills the workers): past
    MAX_WORKER_RESTARTS the filter stops checking, loudly."""
    r = _run(MAX_WORKER_RESTARTS + 1, kill=True, timeout=60, after=False)
    lines = r.stdout.splitlines()
    assert lines[0] == "first: Future JobResult"
    # each death: the page it held passes unchecked; a new worker takes the next page
    assert lines[1 : 1 + MAX_WORKER_RESTARTS] == ["held: worker_died"] * MAX_WORKER_RESTARTS
    # one death too many: the filter stops checking, and fingerprints nothing in the crawl's thread
    rest = lines[1 + MAX_WORKER_RESTARTS :]
    assert rest[:2] == ["held: worker_died", "later: Future no_worker"]
    assert rest[2:] == ["in the crawl's thread: 0", f"worker_restarts: {MAX_WORKER_RESTARTS}", "workers_stopped: 1",
                        f"skipped/worker_died: {MAX_WORKER_RESTARTS + 1}", "skipped/timeout: 0", "skipped/no_worker: 1"]
    log = r.stderr
    assert log.count("the worker process died with http://127.0.0.1/held-") == MAX_WORKER_RESTARTS + 1
    assert "the filter STOPS CHECKING" in log
    assert "fingerprinting in the crawl's thread" not in log


def test_deaths_among_answered_pages_never_stop_the_filter():
    """A site's hostile pages, each killing its worker, among pages that are answered: each
    costs one restart, and the filter goes on checking (six of them used to switch it off)."""
    rounds = MAX_WORKER_RESTARTS + 2
    r = _run(rounds, kill=True, timeout=60)
    lines = r.stdout.splitlines()
    assert lines[1 : 1 + 2 * rounds] == ["held: worker_died", "after: Future JobResult"] * rounds
    assert lines[1 + 2 * rounds :] == [
        "later: Future JobResult", "in the crawl's thread: 0", f"worker_restarts: {rounds}", "workers_stopped: 0",
        f"skipped/worker_died: {rounds}", "skipped/timeout: 0", "skipped/no_worker: 0"]
    assert "the filter STOPS CHECKING" not in r.stderr


def test_a_page_past_the_time_budget_passes_unchecked_and_the_worker_is_replaced():
    r = _run(1, kill=False, timeout=1)
    assert r.stdout.splitlines() == [
        "first: Future JobResult", "held: timeout", "after: Future JobResult", "later: Future JobResult",
        "in the crawl's thread: 0", "worker_restarts: 1", "workers_stopped: 0", "skipped/worker_died: 0",
        "skipped/timeout: 1", "skipped/no_worker: 0"]
    assert "http://127.0.0.1/held-0.html took the worker process more than 1 s (NEARDUP_WORKER_TIMEOUT)" in r.stderr


def test_pages_past_the_time_budget_in_a_row_never_stop_the_filter():
    """A site's slow pages one after another, no page answered between them: each timeout replaced the
    worker, and the sixth switched the filter off for the rest of the crawl (its exact copies then kept).
    A replacement that answers a small probe page shows the machine works: the count starts again."""
    rounds = MAX_WORKER_RESTARTS + 1
    r = _run(rounds, kill=False, timeout=1, after=False)
    assert r.stdout.splitlines() == [
        "first: Future JobResult", *["held: timeout"] * rounds, "later: Future JobResult",
        "in the crawl's thread: 0", f"worker_restarts: {rounds}", "workers_stopped: 0", "skipped/worker_died: 0",
        f"skipped/timeout: {rounds}", "skipped/no_worker: 0"]
    assert "the filter STOPS CHECKING" not in r.stderr


def test_pages_past_the_time_budget_without_end_stop_the_filter():
    """Every page past the time budget (a budget too small for the site's pages): each cost a timeout and a
    restart, without end, once probes kept the count of restarts low. Past ``MAX_PAGES_LOST`` pages lost in
    a row (3 here) the filter stops checking, as for a machine that cannot run the workers."""
    r = _run(3, kill=False, timeout=1, after=False, lost=3)
    lines = r.stdout.splitlines()
    assert lines[1:5] == ["held: timeout"] * 3 + ["later: Future no_worker"], lines
    assert "workers_stopped: 1" in lines and "MAX_PAGES_LOST" in r.stderr


#: The slow page: elements of as many attributes each as the pre-parse scan lets through
#: (``hostile_scan.MAX_ATTRIBUTES``): lexbor's time grows with their square, ~5 ms an element (7 s in all)
SLOW_ATTRIBUTES = MAX_ATTRIBUTES
SLOW_ELEMENTS = 1_500


def test_a_crawl_with_a_page_the_worker_is_slow_on_goes_on(tmp_path):
    site = DemoSite()
    tag = b"<div " + b" ".join(b"a%d" % i for i in range(SLOW_ATTRIBUTES)) + b">"
    slow = (b"<html><body>" + tag * SLOW_ELEMENTS + b"<p>" + b"a page of elements of very many attributes " * 10
            + b"</p></body></html>")
    assert hostile_reason(slow) is None  # (slow, yet within the scan's bounds: the time budget's case)
    start = (b"<html><body><p>Where the crawl starts: the demo site, and a page the worker is slow on, with "
             b"enough words to be fingerprinted itself.</p><a href='/'>home</a> <a href='/slow.html'>slow</a>"
             b"</body></html>")

    def respond(target: str) -> tuple[int, dict[str, str], bytes]:
        if target == "/start.html":
            return 200, {"Content-Type": "text/html"}, start
        if target == "/slow.html":
            return 200, {"Content-Type": "text/html"}, slow
        from urllib.parse import parse_qs, urlsplit

        parts = urlsplit(target)
        status, ctype, body = site.page(parts.path, parse_qs(parts.query))
        return status, {"Content-Type": ctype}, body

    # The slow page is answered once the crawl's log says the worker is up, so that its time budget
    # runs from a worker's hand whatever the machine's speed (a page this big that came earlier would
    # wait for the worker in the queue: START_PATH_MAX_BYTES; tests/test_worker_start.py covers that).
    log_path = tmp_path / "crawl.log"

    def after_the_worker(target: str) -> float:
        if target == "/slow.html":
            wait_for_line(log_path, WORKER_UP)
        return 0.0

    with PageServer(respond, after_the_worker) as server:
        store = tmp_path / "store"
        r = scrapy_crawl(f"{server.url}/start.html", tmp_path, f"NEARDUP_STORE={store}", "NEARDUP_WORKERS=1",
                         "NEARDUP_WORKER_TIMEOUT=2", "LOG_LEVEL=INFO", log=log_path)
    log = r.stderr
    assert WORKER_UP in log, log[-3000:]
    assert r.returncode == 0 and "'finish_reason': 'finished'" in log, log[-3000:]
    items = read_jsonl(tmp_path / "pages.jsonl")
    base = server.url + "/"
    assert paths([i["url"] for i in items], base) == sorted(
        site.expected_kept() | {"/short.html", "/start.html", "/slow.html"})
    dups = read_jsonl(store / "duplicates.jsonl")
    assert {d["url"][len(base) - 1 :]: d["duplicate_of"][len(base) - 1 :] for d in dups} == site.expected_dropped()
    assert stat(log, "neardup/skipped/timeout") == 1
    assert stat(log, "neardup/worker_restarts") == 1
    assert stat(log, "neardup/kept") == len(site.expected_kept()) + 1  # (+ the start page)
    assert f"{server.url}/slow.html took the worker process more than 2 s" in log
    assert stat(log, "neardup/skipped/worker_died") is None and " ERROR: " not in log


@pytest.mark.parametrize(("value", "message"), [
    (0, "NEARDUP_WORKER_TIMEOUT must be > 0, got 0"),
    ("soon", "NEARDUP_WORKER_TIMEOUT must be a number of seconds, got 'soon'"),
])
def test_the_time_budget_is_checked_with_the_setting_named(value, message):
    from scrapy.settings import Settings

    from scrapy_neardup.crawler.config import ConfigError, NearDupConfig

    assert NearDupConfig.from_settings(Settings()).worker_timeout == 10.0
    assert NearDupConfig.from_settings(Settings({"NEARDUP_WORKER_TIMEOUT": "2.5"})).worker_timeout == 2.5
    with pytest.raises(ConfigError, match=message):
        NearDupConfig.from_settings(Settings({"NEARDUP_WORKER_TIMEOUT": value}))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_that_cannot_run_still_ends_with_its_killed_parent():
    """The worker ends the moment its parent is killed, even when its own stdin
    watch cannot run (here: the worker stopped with SIGSTOP; on a loaded machine,
    a thread waiting seconds for the CPU or the GIL): the kernel kills it."""
    import os
    import signal
    import time
    from pathlib import Path

    code = ("import threading, time\n"
            "from scrapy_neardup.dedup.fingerprint.jobs import WorkerProcess\n"
            "def start():\n"
            "    w = WorkerProcess()\n"
            "    print(w.process.pid, flush=True)\n"
            "    time.sleep(600)\n"
            "threading.Thread(target=start, daemon=True).start()\n"  # (started from a thread, as the filter does)
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        os.kill(worker, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = Path(f"/proc/{worker}/status")
            if not status.exists() or "zombie" in status.read_text(errors="replace").lower():
                break
            time.sleep(0.05)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the stopped worker outlived its killed parent")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_worker_leaves_no_directory_of_its_socket_behind(tmp_path, monkeypatch):
    """The worker listens on a Unix socket in a directory multiprocessing makes (``TMPDIR/pymp-*``) and
    removes only at a normal interpreter exit, which a worker never makes: one was left per worker."""
    from scrapy_neardup.dedup.fingerprint.jobs import WorkerProcess

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    worker = WorkerProcess()
    try:
        assert list(tmp_path.iterdir()) == []  # (gone once the crawl's process has connected)
    finally:
        worker.kill()
    assert list(tmp_path.iterdir()) == []


def test_a_stop_signal_to_the_process_group_is_the_crawls_to_handle():
    """`kill -TERM -- -PGID` (systemd's stop) and Ctrl-C reach the worker too: it died of SIGTERM with a page in
    hand, which passed unchecked, and a replacement was started while the crawl stopped."""
    import signal

    from scrapy_neardup.dedup.fingerprint.jobs import WorkerProcess

    worker = WorkerProcess()
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            os.kill(worker.pid, sig)
        page = b"<html><body><p>" + b"the worker answers after a stop signal " * 20 + b"</p></body></html>"
        assert worker.run(page, "utf-8", 15, timeout=60).value is not None
        assert worker.process.poll() is None
    finally:
        worker.kill()


def test_the_worker_makes_the_pages_head_for_ranged_gets_with_its_fingerprint():
    """The head a fetched page keeps for the ranged GETs that confirm its copies (``window.page_head``) comes
    back with its fingerprint from the worker process (``JobResult.head``), as from the crawl's thread while
    the workers start; none for a page with no fingerprint, or when not asked for."""
    from scrapy_neardup.dedup.fingerprint.jobs import WorkerProcess, fingerprint_job
    from scrapy_neardup.dedup.fingerprint.window import page_head

    page = (b"<html><head><style>" + b"p{}" * 200 + b"</style></head><body><p>"
            + b"the worker reads the page's text once " * 30 + b"</p></body></html>")
    assert page_head(page, 64) >> 32 == len(page) and page_head(page, 64) & 0xFFFFFF
    worker = WorkerProcess()
    try:
        assert worker.run(page, "utf-8", 15, timeout=60, window=64).head == page_head(page, 64)
        assert worker.run(page, "utf-8", 15, timeout=60).head is None
        assert worker.run(b"<p>two words</p>", "utf-8", 15, timeout=60, window=64).head is None  # (too short)
    finally:
        worker.kill()
    assert fingerprint_job(page, "utf-8", 15, no_budget=True, window=64).head == page_head(page, 64)
