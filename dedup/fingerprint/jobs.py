"""Fingerprinting as a job for a worker process, and the handle on one.

A crawl's reactor thread is busy with Scrapy itself; fingerprinting in a
worker process uses another core. The job returns a small tuple, not the
parsed page, so little crosses the process boundary. ``WorkerProcess``
starts a worker (``fingerprint.worker``: a fresh interpreter, never the
parent's ``__main__``), hands it one job at a time with a time budget, and
kills it when it overruns or has died.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Client, Connection
from typing import IO, Any, NamedTuple

from selectolax.lexbor import LexborHTMLParser

from ..features import UNDETERMINED
from .links import LinkJob, page_links
from .pipeline import Fingerprinter
from .window import page_head

_FINGERPRINTERS: dict[int, Fingerprinter] = {}

#: Seconds a new worker may take to import and load its tables before it counts as failed
START_TIMEOUT = 120.0


class JobResult(NamedTuple):
    value: int | None
    reason: str | None
    title: str
    text: str
    language: str = UNDETERMINED  # of the page's prose (``features.language``)
    #: the page's outlinks when asked for (``links.LinkJob``) and the page was parsed; else None
    links: list[str] | None = None
    #: the page's head for ranged GETs when asked for (``window.page_head``; 0: no window of text) and it has a
    #: fingerprint; else None
    head: int | None = None


def fingerprint_job(body: bytes, encoding: str | None, min_tokens: int, links: LinkJob | None = None, *,
                    no_budget: bool = False, window: int = 0) -> JobResult:
    """Fingerprint HTML bytes (one ``Fingerprinter`` per process and ``min_tokens``);
    with ``links``, read the page's outlinks from the same tree (``links.page_links``); with ``window``, the
    page's head for the ranged GETs that confirm its copies (``window.page_head`` of that many bytes).
    ``no_budget``: in a thread no time budget stops (``Fingerprinter.fingerprint_html``)."""
    fper = _FINGERPRINTERS.get(min_tokens)
    if fper is None:
        fper = _FINGERPRINTERS[min_tokens] = Fingerprinter(min_tokens=min_tokens)
    if links is None:
        r = fper.fingerprint_html(body, encoding, no_budget=no_budget)
        return JobResult(r.value, r.reason, r.title, r.text, r.language, None, _head(body, r.value, window))
    found: list[list[str] | None] = []

    def read_links(doc: LexborHTMLParser, tree_encoding: str) -> None:
        try:
            found.append(page_links(doc, body, links, tree_encoding))
        except MemoryError:  # (the worker's cap: as for the fingerprint)
            raise
        except Exception:  # (never at the fingerprint's cost: the spider falls back to its LinkExtractor)
            found.append(None)

    r = fper.fingerprint_html(body, encoding, on_document=read_links, no_budget=no_budget)
    if not found and r.reason == "empty":  # (blank bytes are not parsed: they have no links)
        found.append([])
    # (a binary page, one the pre-parse scan calls hostile, one that failed to parse: None)
    return JobResult(r.value, r.reason, r.title, r.text, r.language, found[0] if found else None,
                     _head(body, r.value, window))


def _head(body: bytes, value: int | None, window: int) -> int | None:
    """The page's head (``window.page_head``) for a page with a fingerprint, when asked for (``window``);
    0, which confirms nothing, if making it failed (never at the cost of the fingerprint)."""
    if not window or value is None:
        return None
    try:
        return page_head(body, window)
    except MemoryError:  # (the worker's cap: as for the fingerprint)
        raise
    except Exception:
        return 0


class WorkerDied(Exception):
    """The worker process ended (killed, out of memory) or never came up."""


class WorkerTimeout(Exception):
    """The worker took longer than its budget over one job."""


class WorkerOutOfMemory(WorkerDied):
    """The worker ran out of memory over a job (its cap, ``memory_mib``) and ended."""


class JobFailed(Exception):
    """Fingerprinting raised in the worker (its message: the exception's repr)."""


class WorkerProcess:
    """One worker process and the connection to it, for one thread at a time.

    Starting one blocks until it is ready (a second or two: imports, rjieba's
    dictionary), or raises ``WorkerDied``. ``on_store_cached`` is called (in
    the thread that talks to it) once it has the store's kernels in the cache.
    """

    def __init__(self, on_store_cached: Callable[[], object] | None = None,
                 start_timeout: float = START_TIMEOUT, memory_mib: int = 0) -> None:
        self._on_store_cached = on_store_cached
        self.process = subprocess.Popen([sys.executable, "-m", "scrapy_neardup.dedup.fingerprint.worker",
                                         "--memory-mib", str(memory_mib), "--parent-pid", str(os.getpid())],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]  # (PIPE: never None)
        self.conn: Connection | None = None
        try:
            authkey = os.urandom(32)
            self._stdin.write(authkey.hex().encode() + b"\n")
            self._stdin.flush()
            assert self.process.stdout is not None
            # (START_TIMEOUT bounds the whole start: a worker stuck before it says where it
            # listens is killed, so its address reads as the end of the pipe)
            deadline = time.monotonic() + start_timeout
            stuck = threading.Timer(start_timeout, self.process.kill)
            stuck.daemon = True  # (never holds up the interpreter's exit)
            stuck.start()
            try:
                with self.process.stdout:  # the worker's address; then stdout is no more ours
                    address = self.process.stdout.readline().decode().strip()
            finally:
                stuck.cancel()
            if not address:
                if time.monotonic() >= deadline:
                    raise WorkerTimeout()
                raise WorkerDied(f"the worker process ended as it started (exit status {self.process.wait()})")
            self.conn = Client(address, authkey=authkey)
            self._receive(deadline, "ready")
        except WorkerTimeout:
            self.kill()
            raise WorkerDied(f"the worker process was not ready in {start_timeout:g} s") from None
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def run(self, body: bytes, encoding: str | None, min_tokens: int, timeout: float,
            links: LinkJob | None = None, window: int = 0) -> JobResult:
        """Fingerprint a page in the worker (and read its links: ``links``; its head: ``window``), within
        ``timeout`` seconds; else ``WorkerTimeout`` (the worker is left as it is: kill it), ``WorkerDied``
        (``WorkerOutOfMemory`` when it said so) or ``JobFailed``."""
        assert self.conn is not None
        try:
            self.conn.send((body, encoding, min_tokens, links, window))
        except OSError as exc:  # (a broken pipe: it is gone)
            raise WorkerDied(repr(exc)) from None
        return self._receive(time.monotonic() + timeout, "result")

    def _receive(self, deadline: float, kind: str) -> Any:
        """The next message of ``kind`` before ``deadline`` (notices on the way are handled)."""
        assert self.conn is not None
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not self.conn.poll(left):
                    raise WorkerTimeout()
                got, payload = self.conn.recv()
            except (EOFError, OSError) as exc:
                raise WorkerDied(repr(exc)) from None
            if got == "store_cached":
                if self._on_store_cached is not None:
                    self._on_store_cached()
            elif got == "error":
                raise JobFailed(payload)
            elif got == "out_of_memory":
                raise WorkerOutOfMemory(payload)
            elif got == kind:
                return payload

    def close(self, wait: float = 5.0) -> None:
        """Let the worker end (its stdin closes), or kill it after ``wait`` seconds."""
        try:
            self._stdin.close()
            self.process.wait(wait)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        """End the worker at once (a no-op once it has ended)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for end in (self.conn, self._stdin):
            try:
                if end is not None:
                    end.close()
            except OSError:
                pass
