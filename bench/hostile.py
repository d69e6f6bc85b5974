"""Time and memory of fingerprinting each page of the hostile corpus (issue 14).

    .venv/bin/python bench/hostile.py

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


def main() -> None:
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
