"""Time and memory of fingerprinting each page of the hostile corpus (issue 14).

    .venv/bin/python bench/hostile.py

Each page of ``tests/fixtures/hostile.py`` is fingerprinted in a process of
its own (compiled kernels loaded first, as in a crawl's worker), timing the
call and the growth of peak RSS it causes. The crawl's cap
(``NEARDUP_MAX_PAGE_BYTES``, 10 MiB) skips larger pages before this point;
the 20 MB page is measured anyway, to show why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from tests.fixtures.hostile import hostile_pages
from dedup.fingerprint.jobs import fingerprint_job
path = sys.argv[1]
ctype, body, expected = hostile_pages()[path]
enc = ctype.split("charset=")[1] if "charset=" in ctype else None
fingerprint_job(b"<p>" + b"warm the kernels with a few words of text " * 5 + b"</p>", None, 20)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
r = fingerprint_job(body, enc, 20)
dt = time.perf_counter() - t
print(json.dumps({"page": path, "bytes": len(body), "result": r.reason or "fingerprinted", "ms": round(dt * 1000, 1),
                  "peak_rss_growth_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024, 1)}))
"""


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fixtures.hostile import hostile_pages

    rows = []
    for path in hostile_pages():
        r = subprocess.run([sys.executable, "-c", CHILD, path, str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
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
    out = ROOT / "bench" / "results" / "hostile.json"
    out.write_text(json.dumps({"summary": summary, "pages": rows}, indent=1))


if __name__ == "__main__":
    main()
