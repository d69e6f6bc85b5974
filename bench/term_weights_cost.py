"""What the term weights (word frequencies of the prose's language, ``term_table``) cost.

    .venv/bin/python bench/term_weights_cost.py [--data ../shared/data] [--passes 5] [--schemes default,zk9]
    .venv/bin/python bench/term_weights_cost.py --memory default   # RSS of a fresh process after its first page
    .venv/bin/python bench/term_weights_cost.py --schemes zk9,default --clock cpu --passes 9   # CPU time, not wall

``zk9`` is the scheme with a knee no token reaches: the table damps nothing,
so the difference is what looking tokens up and counting common ones once costs
(the language is read either way, for the mask). Any ``bench/quality.py``
scheme name works; scheme v7's cost was measured beside v8 in one process
before v7 was removed (CHANGELOG.md).

Cost: the same process fingerprints every page of aeb, zh-cwced and the
installation guide's ja and ko pages with each scheme, page by page, the
order of the schemes rotating each pass; prints the median over passes of
the mean milliseconds per page.
"""

from __future__ import annotations

import argparse
import gzip
import resource
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from quality import SCHEMES, _scheme  # noqa: E402
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sets(data: Path) -> dict[str, list[bytes]]:
    out = {"aeb": [gzip.decompress(f.read_bytes()) for f in sorted((data / "aeb" / "html").glob("*.html.gz"))],
           "zh-cwced": [f.read_bytes() for f in sorted((data / "zh-cwced" / "original").glob("*.html"))]}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(data / "sites" / "installation-guide.tar.gz") as tf:
            tf.extractall(tmp, filter="data")
        for lang in ("ja", "ko"):
            out[f"guide-{lang}"] = [f.read_bytes() for f in sorted(Path(tmp).rglob(f"site/{lang}/*.html"))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--schemes", default="default,zk9")
    ap.add_argument("--memory", default="")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time (time.process_time), steadier than wall time on a shared machine")
    a = ap.parse_args()
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    data = Path(a.data)

    def make(name: str) -> Fingerprinter:
        return Fingerprinter(SCHEMES[name]() if name in SCHEMES else _scheme(name))

    if a.memory:
        page = gzip.decompress(sorted((data / "aeb" / "html").glob("*.html.gz"))[0].read_bytes())
        before = _rss_mb()
        fper = make(a.memory)
        r = fper.fingerprint_html(page)
        print(f"{a.memory}: RSS before {before:.1f} MB, after its first page {_rss_mb():.1f} MB (ok={r.ok})")
        return
    schemes = [(name, make(name)) for name in a.schemes.split(",")]
    for set_name, pages in sets(data).items():
        for _, fper in schemes:  # warm: kernels, dictionaries, tables
            for page in pages:
                fper.fingerprint_html(page)
        times: dict[str, list[float]] = {name: [] for name, _ in schemes}
        for p in range(a.passes):
            spent = dict.fromkeys(times, 0.0)
            for page in pages:
                order = schemes[p % len(schemes):] + schemes[:p % len(schemes)]
                for name, fper in order:
                    t = clock()
                    fper.fingerprint_html(page)
                    spent[name] += clock() - t
            for name in times:
                times[name].append(1000 * spent[name] / len(pages))
        base = statistics.median(times[schemes[0][0]])
        print(f"{set_name:10s} ({len(pages)} pages): " + ", ".join(
            f"{name} {statistics.median(v):.3f} ms ({statistics.median(v) / base:.2f}x)" for name, v in times.items()),
            flush=True)


if __name__ == "__main__":
    main()
