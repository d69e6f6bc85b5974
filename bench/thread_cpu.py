"""The crawl's thread CPU, for ``crawl_bench.py``: an extension that reads
``time.thread_time()`` in the reactor's thread when the engine starts and
when the spider closes (signal handlers run there), and puts the difference
in the stats as ``bench/thread_cpu_s``. Divided by the responses, it is what
each response costs that thread: robust to a busy machine, as wall time is not.

    -s 'EXTENSIONS={"bench.thread_cpu.ThreadCpu": 0}'

With ``-s BENCH_PROFILE=PATH`` it also profiles that thread (``cProfile``,
enabled in the reactor's thread only: the worker's serving threads and the
index writer are not in it) from engine start to spider close, and writes
the ``pstats`` file to ``PATH`` (``crawl_bench.py --profile DIR``; read with
``bench/thread_profile.py``). The profiler's own overhead inflates the
thread CPU of such a run: read its profile, not its ``bench/thread_cpu_s``.
"""

from __future__ import annotations

import cProfile
import time

from scrapy import signals
from scrapy.crawler import Crawler


class ThreadCpu:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.start = 0.0
        self.profile_path = crawler.settings.get("BENCH_PROFILE")
        self.profile: cProfile.Profile | None = None
        crawler.signals.connect(self._started, signal=signals.engine_started)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThreadCpu:
        return cls(crawler)

    def _started(self) -> None:
        self.start = time.thread_time()
        if self.profile_path:
            self.profile = cProfile.Profile(time.thread_time)  # (this thread's CPU, not wall time)
            self.profile.enable()

    def _closed(self) -> None:
        if self.profile is not None:
            self.profile.disable()
            self.profile.dump_stats(self.profile_path)
        self.stats.set_value("bench/thread_cpu_s", round(time.thread_time() - self.start, 4))
