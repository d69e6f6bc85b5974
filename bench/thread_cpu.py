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

With ``-s BENCH_SERIES=PATH`` it writes, as JSON, the thread's CPU seconds
and the wall seconds since the start at every 250th response
(``crawl_bench.py --series DIR``): whether a response costs more as the crawl
goes on.

It also puts in the stats the thread's CPU from the ``START_RESPONSES``-th
response (300) to the spider's close (``bench/thread_cpu_after_start_s``)
and the responses received in that time (``bench/responses_after_start``):
the cost of a response once the crawl's first seconds are over (the
filter's worker process starting, its warm-up, the garbage collector's
freezes), which a short crawl's whole-crawl figure mixes with them.

It also puts in the stats the CPU of the crawl's whole process over the same
time (``bench/process_cpu_s``: every thread of it, not its child processes):
what the process's other threads (the filter's worker-serving threads, its
warm-up, Scrapy's own) take beside the reactor's thread, holding the GIL
while they run Python.

And each live thread's CPU since it started, by its name (``bench/thread_cpu_s/<name>``, from
``/proc/self/task``, in clock ticks of 10 ms): which of the other threads take it.

It also puts in the stats the reactor thread's CPU spent in the garbage
collector (``bench/gc_cpu_s``), its full collections and the objects the
collector tracks at the end (``bench/gc_objects``).
"""

from __future__ import annotations

import cProfile
import gc
import json
import threading
import time
from pathlib import Path

from scrapy import signals
from scrapy.crawler import Crawler

#: the responses that make a crawl's start, for ``bench/thread_cpu_after_start_s``
START_RESPONSES = 300


class ThreadCpu:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.start = 0.0
        self.process_start = 0.0
        self.profile_path = crawler.settings.get("BENCH_PROFILE")
        self.profile: cProfile.Profile | None = None
        self.series_path = crawler.settings.get("BENCH_SERIES")
        self.series: list[tuple[int, float, float]] = []
        self.responses = 0
        self.wall = 0.0
        self.after_start: float | None = None  # (thread CPU at the START_RESPONSES-th response)
        # (the reactor thread's garbage collections: count and CPU seconds, per generation)
        self.gc_by_gen = [[0, 0.0], [0, 0.0], [0, 0.0]]
        self._gc_at: float | None = None
        self._thread = threading.get_ident()
        crawler.signals.connect(self._started, signal=signals.engine_started)
        crawler.signals.connect(self._response, signal=signals.response_received)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThreadCpu:
        return cls(crawler)

    def _started(self) -> None:
        self.start = time.thread_time()
        self.process_start = time.process_time()
        self.wall = time.monotonic()
        self._thread = threading.get_ident()
        gc.callbacks.append(self._gc)
        if self.profile_path:
            self.profile = cProfile.Profile(time.thread_time)  # (this thread's CPU, not wall time)
            self.profile.enable()

    def _gc(self, phase: str, info: dict) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._gc_at = time.thread_time()
        elif self._gc_at is not None:
            self.gc_by_gen[info["generation"]][0] += 1
            self.gc_by_gen[info["generation"]][1] += time.thread_time() - self._gc_at
            self._gc_at = None

    def _response(self) -> None:
        self.responses += 1
        if self.responses == START_RESPONSES:
            self.after_start = time.thread_time()
        if self.series_path and self.responses % 250 == 0:
            self.series.append((self.responses, round(time.thread_time() - self.start, 4),
                                round(time.monotonic() - self.wall, 4)))

    def _closed(self) -> None:
        if self.series_path:
            Path(self.series_path).write_text(json.dumps(self.series))
        if self.profile is not None:
            self.profile.disable()
            self.profile.dump_stats(self.profile_path)
        now = time.thread_time()
        self.stats.set_value("bench/thread_cpu_s", round(now - self.start, 4))
        # (every thread of the crawl's process: the others hold the GIL the reactor's thread waits for)
        self.stats.set_value("bench/process_cpu_s", round(time.process_time() - self.process_start, 4))
        if self.after_start is not None:
            self.stats.set_value("bench/thread_cpu_after_start_s", round(now - self.after_start, 4))
            # (the clock started as the START_RESPONSES-th response arrived: its processing is in)
            self.stats.set_value("bench/responses_after_start", self.responses - START_RESPONSES + 1)
        for name, took in _threads_cpu().items():
            self.stats.set_value(f"bench/thread_cpu_s/{name}", took)
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        self.stats.set_value("bench/gc_cpu_s", round(sum(took for _, took in self.gc_by_gen), 4))
        self.stats.set_value("bench/gc_full_collections", self.gc_by_gen[2][0])
        self.stats.set_value("bench/gc_objects", len(gc.get_objects()))
        for gen, (n, took) in enumerate(self.gc_by_gen):
            self.stats.set_value(f"bench/gc_gen{gen}_collections", n)
            self.stats.set_value(f"bench/gc_gen{gen}_s", round(took, 4))


def _threads_cpu() -> dict[str, float]:
    """Each live thread's user + system CPU seconds since it started, by name (``/proc``; {} elsewhere)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[thread.name] = round((int(fields[11]) + int(fields[12])) / tick, 2)  # (utime, stime: 14th, 15th)
    return out
