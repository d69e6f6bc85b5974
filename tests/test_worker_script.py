"""The worker never re-runs the user's script (issue 26, part 3).

Scrapy's documentation ("Run Scrapy from a script") runs a crawl with
``CrawlerProcess`` at a script's top level, with no ``if __name__ ==
"__main__":`` guard. ``multiprocessing`` would import that script again in a
worker it starts (``spawn``, ``forkserver``), running the crawl a second time
there; the filter's worker starts from the package's own entry point instead.
A real subprocess runs such a script with the add-on against a local site."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from scrapy_neardup.crawler.demo_site import DemoSite
from tests.test_crawl import WORKER_UP, demo_site_after_the_worker

SCRIPT = textwrap.dedent('''
    import json
    import scrapy
    from scrapy.crawler import CrawlerProcess

    with open({runs!r}, "a") as runs:  # top-level code: it must run once
        runs.write("ran\\n")


    class MySpider(scrapy.Spider):
        name = "my_spider"
        start_urls = [{url!r}]

        def parse(self, response):
            yield {{"url": response.url}}
            yield from response.follow_all(css="a")

        def closed(self, reason):
            with open({stats!r}, "w") as out:
                json.dump({{k: v for k, v in self.crawler.stats.get_stats().items() if k.startswith("neardup/")}}, out)


    process = CrawlerProcess(settings={{
        "ADDONS": {{"scrapy_neardup.NearDupAddon": 0}},
        "NEARDUP_WORKERS": 1,
        "CONCURRENT_REQUESTS": 1,
        "LOG_LEVEL": "INFO",
    }})
    process.crawl(MySpider)
    process.start()
''')


def test_an_unguarded_script_runs_once_with_the_worker(tmp_path):
    runs, stats, log_path = tmp_path / "runs.txt", tmp_path / "stats.json", tmp_path / "crawl.log"
    # the front page is answered at once, every other page once the log says the worker is up
    with demo_site_after_the_worker(DemoSite(), log_path) as server:
        script = tmp_path / "run_spider.py"
        script.write_text(SCRIPT.format(url=server.url + "/", runs=str(runs), stats=str(stats)))
        with open(log_path, "w") as err:
            r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=err,
                               text=True, timeout=300)
    log = log_path.read_text()
    assert r.returncode == 0, log[-3000:]
    assert WORKER_UP in log, log[-3000:]
    assert runs.read_text() == "ran\n", log[-3000:]
    assert " ERROR: " not in log and " CRITICAL: " not in log and "Traceback" not in log, log[-3000:]
    counted = json.loads(stats.read_text())
    by_the_worker = (counted["neardup/fetched"] - counted.get("neardup/fingerprinted_while_workers_start", 0)
                     - counted.get("neardup/skipped", 0))
    assert by_the_worker > 0, counted
    assert counted["neardup/dropped"] > 0, counted
