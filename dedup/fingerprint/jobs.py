"""Fingerprinting as a picklable job, for worker processes, and their warm-up.

A crawl's reactor thread is busy with Scrapy itself; fingerprinting in a
worker process uses another core. The job returns a small tuple, not the
parsed page, so little crosses the process boundary.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import threading
from multiprocessing.synchronize import Event
from typing import NamedTuple

from .. import jit
from ..features import UNDETERMINED
from .pipeline import Fingerprinter

_FINGERPRINTERS: dict[int, Fingerprinter] = {}


class JobResult(NamedTuple):
    value: int | None
    reason: str | None
    title: str
    text: str
    language: str = UNDETERMINED  # of the page's prose (``features.language``)


def fingerprint_job(body: bytes, encoding: str | None, min_tokens: int) -> JobResult:
    """Fingerprint HTML bytes (one ``Fingerprinter`` per process and ``min_tokens``)."""
    fper = _FINGERPRINTERS.get(min_tokens)
    if fper is None:
        fper = _FINGERPRINTERS[min_tokens] = Fingerprinter(min_tokens=min_tokens)
    r = fper.fingerprint_html(body, encoding)
    return JobResult(r.value, r.reason, r.title, r.text, r.language)


def _exit_with_parent() -> None:
    """End this worker when the process that started it dies, however it dies.
    (A pool worker waits on a queue whose write end it holds itself, so it
    never sees the end of a parent killed with SIGKILL; it would live on.)"""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="neardup-parent-watch", daemon=True).start()


def warm_up(min_tokens: int, store_cached: Event | None = None) -> None:
    """Pool initializer. The worker answers at once, by the reference path,
    while a thread of its own compiles (or loads from the cache) the kernels:
    the store's first (then ``store_cached`` is set, and the crawl's process
    loads them from the cache instead of compiling them beside the crawl),
    then the fingerprinting ones, which jobs use from then on."""
    _exit_with_parent()
    jit.defer("fingerprint")
    jit.warm_reference()  # rjieba's dictionary and the decoders' tables, before the first page

    def compile_all() -> None:
        try:
            jit.warm("store")
        finally:
            if store_cached is not None:
                store_cached.set()
        jit.warm("fingerprint")

    threading.Thread(target=compile_all, name="neardup-warmup", daemon=True).start()
