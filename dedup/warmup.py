"""Compile the numba kernels ahead of first use: ``python -m dedup.warmup``.

numba compiles a kernel on its first call (206 s for all of
them on a 2-core machine, on a slow day; half of it raw_scan) and caches the machine code beside the sources;
``scripts/bootstrap.sh`` runs this right after installing, so that the first
crawl, test or ``python -m dedup`` command does not pay for it.
"""

from __future__ import annotations

import time

import numpy as np

from .fingerprint import Fingerprinter
from .store import SimhashStore

_PAGES = (
    b"<html><title>Warm up</title><body><nav><a href='/'>Home</a></nav><p>"
    + b"Near-duplicate detection for web crawling, with simhash fingerprints. " * 4 + b"</p></body></html>",
    "<p>网页去重：相似网页的指纹只差几位。日本語のテキストもあります。</p>".encode() * 4,
    # a GBK page: the compiled transcoding
    "<meta charset=gbk><p>网页去重：相似网页的指纹只差几位，抓取时丢弃重复的网页。</p>".encode("gbk") * 4,
    # deeper than deep_nesting.MAX_DEPTH: its compiled pass runs too
    b"<div>" * 2100 + b"<script>x</script><!-- c --><p class='a>b'>deeply nested words</p>" + b"</div>" * 2100,
)


def compile_kernels() -> float:
    """Run every compiled kernel once; returns the seconds it took."""
    t = time.perf_counter()
    fper = Fingerprinter()
    for page in _PAGES:
        fper.fingerprint_html(page)
    fps = np.random.default_rng(0).integers(0, 2**63, 3000, dtype=np.uint64)
    with SimhashStore.open(None, capacity=10_000) as store:
        store.add_many(fps[:1000], [str(i) for i in range(1000)])
        store.check_and_add_many(fps[1000:], [str(i) for i in range(1000, 3000)])
        store.query(int(fps[0]))
        store.query_many(fps[:10])
        store.check_and_add(int(fps[1]) ^ 1, "x")
        list(store.pairs())
    return time.perf_counter() - t


if __name__ == "__main__":
    print(f"dedup: compiled kernels in {compile_kernels():.1f} s")
