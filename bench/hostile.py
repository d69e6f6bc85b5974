"""Time and memory of fingerprinting each page of the hostile corpus (issue 14).

    .venv/bin/python bench/hostile.py
    .venv/bin/python bench/hostile.py --scan

``--scan`` measures the pre-parse scan (``dedup.text.hostile_scan``)
instead: its cost per page on the shared article pages against extracting
their text (both in this process, kernels warm, the scan the median of 20
calls), its cost on the hostile shapes it turns away, and what lexbor's
parse costs on one element of 1,000 to 20,000 attributes (each in a process
of its own), the measurement behind ``MAX_ATTRIBUTES``.

Each page of ``tests/fixtures/hostile.py`` is written to a file and
fingerprinted in a process of its own (kernels loaded first), twice: the
first call's growth of peak RSS is the page's memory (what loads lazily,
such as a decoder's tables, included), the second call's time is the page's
time in a warm worker. The crawl's cap
(``NEARDUP_MAX_PAGE_BYTES``, 10 MiB) skips larger pages before this point;
the 20 MB page is measured anyway, to show why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[4])
from scrapy_neardup.dedup.fingerprint.jobs import fingerprint_job
path, enc = sys.argv[1], (sys.argv[3] or None)
with open(sys.argv[2], "rb") as fh:
    body = fh.read()
fingerprint_job(b"<p>" + b"warm the kernels with a few words of text " * 5 + b"</p>", None, 20)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = fingerprint_job(body, enc, 20)  # the first call: its peak memory (lazy tables included)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
t = time.perf_counter()
fingerprint_job(body, enc, 20)  # the second: its time, as in a warm worker
dt = time.perf_counter() - t
print(json.dumps({"page": path, "bytes": len(body), "result": r.reason or "fingerprinted", "ms": round(dt * 1000, 1),
                  "peak_rss_growth_mb": round(grown / 1024, 1)}))
"""


LEXBOR_CHILD = r"""
import sys, time
from selectolax.lexbor import LexborHTMLParser
n = int(sys.argv[1])
body = b"<html><body><div " + b" ".join(b"data-a%d=x" % i for i in range(n)) + b">words</div></body></html>"
t = time.perf_counter()
LexborHTMLParser(body)
print(time.perf_counter() - t)
"""


def scan_cost() -> None:
    """The ``--scan`` measurement (see the module docstring)."""
    import gzip
    import statistics
    import time

    sys.path.insert(0, str(ROOT))
    from scrapy_neardup.dedup import jit
    from scrapy_neardup.dedup.text import extract
    from scrapy_neardup.dedup.text.hostile_scan import hostile_reason

    jit.warm_all()
    aeb = ROOT.parent / "shared" / "data" / "aeb" / "html"
    pages = [gzip.decompress(p.read_bytes()) for p in sorted(aeb.glob("*.html.gz"))]
    scan, thorough, parse = [], [], []
    for page in pages:
        for out, deep in ((scan, False), (thorough, True)):
            runs = []
            for _ in range(20):
                t = time.perf_counter()
                assert hostile_reason(page, thorough=deep) is None
                runs.append(time.perf_counter() - t)
            out.append(statistics.median(runs))
        t = time.perf_counter()
        extract(page)
        parse.append(time.perf_counter() - t)
    words = b"<p>" + b"near duplicate detection for web crawling " * 10 + b"</p>"
    shapes = {
        "one <div> of 200,000 attributes (2.3 MB)": b"<div " + b" ".join(b"data-a%d=x" % i for i in range(200_000))
        + b">" + words,
        "1,000,000 nested <div> (5 MB)": b"<div>" * 1_000_000 + words,
        "3,000,000 <b> (9 MB)": b"<b>" * 3_000_000,
        "1,000,000 closed <b> (8 MB, not hostile)": b"<b>x</b>" * 1_000_000,
        "1,000 unclosed <b id=N>, then 14,000 <p>x</p> (125 KB)":
            b"".join(b"<b id=%d>" % i for i in range(1000)) + b"<p>x</p>" * 14_000,
        "the same, each <b x=\"y>N\"> (a > in a quoted value)":
            b"".join(b'<b x="y>%d">' % i for i in range(1000)) + b"<p>x</p>" * 14_000,
        "one <div> of 200,000 attributes a=\"x>\" (2.3 MB)": b"<div " + b" ".join(b'a%d="x>"' % i for i in range(200_000))
        + b">" + words,
    }
    hostile = {}
    for name, body in shapes.items():
        t = time.perf_counter()
        why = hostile_reason(body, thorough=True)
        hostile[name] = {"ms": round((time.perf_counter() - t) * 1e3, 1), "reason": why}
    lexbor = {}
    for n in (1_000, 2_000, 5_000, 10_000, 20_000):
        r = subprocess.run([sys.executable, "-c", LEXBOR_CHILD, str(n)], capture_output=True, text=True, timeout=600)
        lexbor[n] = round(float(r.stdout.strip()), 3)
    summary = {"article_pages": len(pages), "median_bytes": int(statistics.median(map(len, pages))),
               "scan_ms_median": round(statistics.median(scan) * 1e3, 3),
               "scan_ms_max": round(max(scan) * 1e3, 3),
               "thorough_scan_ms_median": round(statistics.median(thorough) * 1e3, 3),
               "thorough_scan_ms_max": round(max(thorough) * 1e3, 3),
               "extract_ms_median": round(statistics.median(parse) * 1e3, 2),
               "scan_over_extract_median_of_ratios": round(statistics.median(s / p for s, p in zip(scan, parse)), 4),
               "scan_over_extract_sum": round(sum(scan) / sum(parse), 4),
               "hostile_shapes": hostile, "lexbor_s_by_attributes_of_one_element": lexbor}
    print(json.dumps(summary, indent=1))
    (ROOT / "bench" / "results" / "hostile_scan.json").write_text(json.dumps(summary, indent=1))


def main() -> None:
    if "--scan" in sys.argv[1:]:
        scan_cost()
        return
    sys.path.insert(0, str(ROOT))
    from tests.fixtures.hostile import hostile_pages

    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="neardup-hostile-"))
    for path, (ctype, body, _) in hostile_pages().items():
        (tmp / "page").write_bytes(body)  # (the child holds only this page: its peak RSS is this page's)
        enc = ctype.split("charset=")[1] if "charset=" in ctype else ""
        r = subprocess.run([sys.executable, "-c", CHILD, path, str(tmp / "page"), enc, str(ROOT)], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
        if r.returncode:
            rows.append({"page": path, "crash": r.stderr[-500:]})
        else:
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    capped = [x for x in rows if "ms" in x and x["bytes"] <= 10 * 1024 * 1024]
    summary = {"inputs": len(rows), "crashes": sum("crash" in x for x in rows),
               "worst_ms_under_cap": max(x["ms"] for x in capped),
               "worst_rss_mb_under_cap": max(x["peak_rss_growth_mb"] for x in capped)}
    print(json.dumps(summary))
    shutil.rmtree(tmp, ignore_errors=True)
    out = ROOT / "bench" / "results" / "hostile.json"
    out.write_text(json.dumps({"summary": summary, "pages": rows}, indent=1))


if __name__ == "__main__":
    main()
