"""The crawl goes on when the fingerprinting worker process dies: the filter
falls back to the crawl's thread. Run in a subprocess, which installs the
asyncio reactor that the worker pool needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SCRIPT = textwrap.dedent('''
    import asyncio
    import time
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler
    from scrapy_neardup.crawler.middleware import NearDupMiddleware
    from scrapy_neardup.dedup.fingerprint.jobs import JobResult

    crawler = get_crawler(settings_dict={"NEARDUP_WORKERS": 1})
    crawler.stats.open_spider()
    mw = NearDupMiddleware.from_crawler(crawler)
    body = ("<html><body><p>" + "near duplicate detection for web crawling " * 20 + "</p></body></html>").encode()

    def page(i):
        return HtmlResponse(f"http://127.0.0.1/{i}.html", body=body, request=Request(f"http://127.0.0.1/{i}.html"))

    mw.workers.ready.result(timeout=120)          # the worker is up
    first = page(1)
    mw.process_spider_input(first)
    print("via worker:", type(mw._pending[first]).__name__)
    mw._pending[first].result(timeout=60)
    big = ("<html><body>" + "<p>" + "a long page that keeps the worker busy " * 20 + "</p>" * 1) * 4000
    in_hand = HtmlResponse("http://127.0.0.1/big.html", body=(big + "</body></html>").encode(),
                           request=Request("http://127.0.0.1/big.html"))
    mw.process_spider_input(in_hand)            # a page the worker holds when it dies
    time.sleep(0.05)
    print("busy:", not mw._pending[in_hand].done())
    for proc in list(mw.workers.pool._processes.values()):
        proc.kill()
        proc.join()
    time.sleep(0.5)
    result = asyncio.run(mw._fingerprint(in_hand))   # it is fingerprinted here instead
    print("in hand:", type(result).__name__, result.value is not None)
    for i in range(2, 5):                        # the pool is broken: fall back, keep going
        r = page(i)
        mw.process_spider_input(r)
        print("after the crash:", type(mw._pending[r]).__name__, mw._pending[r].value is not None)
    print("failures:", crawler.stats.get_value("neardup/worker_failures"))
    mw.spider_closed("finished")
''')


def test_a_dead_worker_does_not_stop_the_filter():
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "via worker: Future"
    assert lines[1] == "busy: True"
    assert lines[2] == "in hand: JobResult True"
    assert lines[3:6] == ["after the crash: JobResult True"] * 3
    assert lines[6] == "failures: 1"
    assert "fingerprinting in the crawl's thread from now on" in r.stderr
