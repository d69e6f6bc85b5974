"""Which compiled kernels this process may call now, and warming them up.

numba compiles a kernel the first time it is called and caches the machine
code (README, "Compiled code"), so the first call in a fresh install takes
tens of seconds. A process that must never wait for that, a crawl whose
reactor thread would stall, calls ``defer()``: from then on ``ready(group)``
is False until ``warm(group)`` has run (in a background thread or a worker
process), and the library takes its reference paths, which need no
compilation and give the same results (tested). A script, the command line
and the tests never call ``defer``: every group is ready there, and the
first call compiles.

Groups: ``fingerprint`` (the visible-text scan, the word kernel with jieba's
segmenter, MurmurHash3 over many strings, the simhash sums) and ``store``
(the permuted tables' probes, merges and self-join).

``python -m dedup warmup`` (or ``neardup warmup``) compiles both, each group in a process of its
own so that two cores share the work.

>>> sorted(GROUPS)
['fingerprint', 'store']
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

GROUPS = ("fingerprint", "store")
_ready = dict.fromkeys(GROUPS, True)
_warmed: set[str] = set()
_lock = threading.Lock()


def ready(group: str) -> bool:
    """Whether this process may call the compiled kernels of ``group`` now. O(1)."""
    return _ready[group]


def defer(*groups: str) -> None:
    """Make ``groups`` (default: all) not ready until ``warm`` has run for them."""
    for g in groups or GROUPS:
        if g not in _warmed:
            _ready[g] = False


def _warm_fingerprint() -> None:
    import numpy as np

    from .features.murmur import hash64_many
    from .fingerprint import Fingerprinter
    from .simhash import simhash

    fper = Fingerprinter()
    for page in _PAGES:
        fper.fingerprint_html(page, compiled=True)
    hashes = hash64_many(["warm", "up"])
    simhash(hashes, np.array([1.0, 2.0]), compiled=True)


def _warm_store() -> None:
    import numpy as np

    from .store import SimhashStore

    fps = np.random.default_rng(0).integers(0, 2**63, 3000, dtype=np.uint64)
    with SimhashStore.open(None, capacity=10_000, compiled=True) as store:
        store.add_many(fps[:1000], [str(i) for i in range(1000)])
        store.check_and_add_many(fps[1000:], [str(i) for i in range(1000, 3000)])
        store.query(int(fps[0]))
        store.query_many(fps[:10])
        store.check_and_add(int(fps[1]) ^ 1, "x")
        for i in range(600):  # single adds past the buffer: flushes and merges
            store.check_and_add(int(fps[i]) ^ 0xFFFF0000, f"y{i}")
        list(store.pairs())
        store.check_invariants()
    # a persistent store reopened from its snapshot (memory-mapped arrays), as a resumed crawl does
    with tempfile.TemporaryDirectory(prefix="neardup-warmup-") as tmp:
        with SimhashStore.open(tmp, capacity=10_000, compiled=True) as store:
            store.add_many(fps[:2000], [str(i) for i in range(2000)])
        with SimhashStore.open(tmp, capacity=10_000, compiled=True) as store:
            store.check_and_add(int(fps[5]) ^ 3, "z")
            store.query(int(fps[6]))


_WARMERS: dict[str, Callable[[], None]] = {"fingerprint": _warm_fingerprint, "store": _warm_store}

_PAGES = (
    b"<html><title>Warm up - Site</title><body><nav><a href='/'>Home</a></nav><p>"
    + b"Near-duplicate detection for web crawling, with simhash fingerprints. " * 4 + b"</p></body></html>",
    "<p>网页去重：相似网页的指纹只差几位。日本語のテキストもあります。ｆｕｌｌ ｗｉｄｔｈ … ™ Straße</p>".encode() * 4,
    "<meta charset=gbk><p>网页去重：相似网页的指纹只差几位，抓取时丢弃重复的网页。</p>".encode("gbk") * 4,
    "<p>สวัสดีครับ ภาษาไทย 한국어 텍스트 العربية Ελληνικά</p>".encode() * 6,
)


def warm(group: str) -> float:
    """Compile (or load from the cache) the kernels of ``group`` in this
    process by running each on small inputs, then mark it ready. Returns the
    seconds it took. Thread-safe; a second call returns at once."""
    with _lock:
        if group in _warmed:
            return 0.0
        t = time.perf_counter()
        _WARMERS[group]()
        _warmed.add(group)
        _ready[group] = True
        return time.perf_counter() - t


def warm_reference() -> None:
    """Load what the reference paths load on first use (jieba's dictionary in
    rjieba, the decoders' tables), so the first pages do not pay for it."""
    from .fingerprint import Fingerprinter

    fper = Fingerprinter()
    for page in _PAGES:
        fper.fingerprint_html(page, compiled=False)


def warm_in_background(groups: Iterable[str] = GROUPS, *, reference_first: bool = False,
                       wait: Callable[[], object] | None = None) -> threading.Thread:
    """``warm`` each group in a daemon thread (after ``warm_reference`` when
    ``reference_first``, and after ``wait()`` returns, e.g. until another
    process has filled the cache); a failure is logged, and the group stays
    on its reference path."""
    groups = tuple(groups)

    def run() -> None:
        if reference_first:
            try:
                warm_reference()
            except Exception:
                logger.exception("could not warm up the reference path")
        if wait is not None:
            wait()
        for g in groups:
            try:
                seconds = warm(g)
                logger.debug("compiled kernels of %s ready in %.1f s", g, seconds)
            except Exception:
                logger.exception("could not compile the %s kernels; using the reference path", g)

    thread = threading.Thread(target=run, name="neardup-warmup", daemon=True)
    thread.start()
    return thread


def warm_all() -> float:
    """Compile every group, each in a process of its own, at the same time;
    returns the wall seconds. Raises if one fails."""
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", f"from scrapy_neardup.dedup import jit; jit.warm({g!r})"]) for g in GROUPS]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"compiling the kernels failed (exit codes {codes})")
    return time.perf_counter() - t

