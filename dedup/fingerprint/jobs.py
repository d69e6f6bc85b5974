"""Fingerprinting as a picklable job, for worker processes.

A crawl's reactor thread is busy with Scrapy itself; fingerprinting in a
worker process uses another core. The job returns a small tuple, not the
parsed page, so little crosses the process boundary.
"""

from __future__ import annotations

from typing import NamedTuple

from .. import jit
from .pipeline import Fingerprinter

_FINGERPRINTERS: dict[int, Fingerprinter] = {}


class JobResult(NamedTuple):
    value: int | None
    reason: str | None
    title: str
    text: str


def fingerprint_job(body: bytes, encoding: str | None, min_tokens: int) -> JobResult:
    """Fingerprint HTML bytes (one ``Fingerprinter`` per process and ``min_tokens``)."""
    fper = _FINGERPRINTERS.get(min_tokens)
    if fper is None:
        fper = _FINGERPRINTERS[min_tokens] = Fingerprinter(min_tokens=min_tokens)
    r = fper.fingerprint_html(body, encoding)
    return JobResult(r.value, r.reason, r.title, r.text)


def warm_up(min_tokens: int) -> None:
    """Pool initializer: compile (or load from the cache) the fingerprinting
    kernels and load the segmenter before the first page."""
    jit.warm("fingerprint")
    fingerprint_job("<p>预热 warm up</p>".encode(), "utf-8", min_tokens)
