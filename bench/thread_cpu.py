"""The crawl's thread CPU, for ``crawl_bench.py``: an extension that reads
``time.thread_time()`` in the reactor's thread when the engine starts and
when the spider closes (signal handlers run there), and puts the difference
in the stats as ``bench/thread_cpu_s``. Divided by the responses, it is what
each response costs that thread: robust to a busy machine, as wall time is not.

    -s 'EXTENSIONS={"bench.thread_cpu.ThreadCpu": 0}'
"""

from __future__ import annotations

import time

from scrapy import signals
from scrapy.crawler import Crawler


class ThreadCpu:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.start = 0.0
        crawler.signals.connect(self._started, signal=signals.engine_started)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThreadCpu:
        return cls(crawler)

    def _started(self) -> None:
        self.start = time.thread_time()

    def _closed(self) -> None:
        self.stats.set_value("bench/thread_cpu_s", round(time.thread_time() - self.start, 4))
