"""``neardup report``: the report's size and the time to build it, for a real crawl and a 100k-page one.

    .venv/bin/python bench/report_bench.py [--pages 100000] [--crawl DIR] [--altair /work/peers/altair/bin/python]

* sqlite3-doc: a real ``neardup crawl --out`` of ``../shared/data/sites/sqlite3-doc.tar.gz``
  (served by Python's threaded HTTP server on 127.0.0.1), with ``NEARDUP_DROPPED_TEXT_BYTES``
  set; ``--crawl DIR`` reuses a crawl directory made before;
* synthetic: a crawl directory of ``--pages`` pages written as a crawl writes them
  (``tests/report_fixtures.synthetic_crawl``: 70% kept, 25% dropped, 5% avoided).

For each: the report's size, the time to build it in this process (median of 3) and as
``neardup report`` (a new process: imports included), and, as the baseline of the same
run, the time to only read and aggregate the inputs (``sources.read``): the plotting and
the HTML cost the difference. The plotting alternative is measured on the same
aggregates: the same five plots as Vega-Lite through altair, saved as one HTML file with
vega's JavaScript inlined (``--altair``: the Python of a virtualenv with altair and
vl-convert-python, kept out of the project's dependencies). Results: bench/results/report.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scrapy_neardup.crawler.report import build_report  # noqa: E402
from scrapy_neardup.crawler.report.sources import locate, read  # noqa: E402
from tests.report_fixtures import synthetic_crawl  # noqa: E402

SITE = ROOT.parent / "shared" / "data" / "sites" / "sqlite3-doc.tar.gz"

ALTAIR = r'''
import datetime, json, sys
import altair as alt
d = json.load(open(sys.argv[1]))
def bars(rows, title):
    return alt.Chart(alt.Data(values=[{"label": k, "n": n} for k, n in rows]), title=title).mark_bar().encode(
        x="n:Q", y=alt.Y("label:N", sort="-x"))
def cum(times, name):
    t = sorted(times); step = max(1, len(t) // 2000); idx = list(range(0, len(t), step)) + [len(t) - 1]
    return [{"time": datetime.datetime.fromtimestamp(t[i], datetime.timezone.utc).isoformat(), "n": i + 1,
             "what": name} for i in idx] if t else []
line = alt.Chart(alt.Data(values=cum(d["kept"], "kept") + cum(d["dropped"], "dropped") + cum(d["avoided"], "avoided")),
                 title="over time").mark_line(interpolate="step-after").encode(x="time:T", y="n:Q", color="what:N")
hist = alt.Chart(alt.Data(values=[{"d": k, "n": n} for k, n in d["distances"]]), title="distances").mark_bar().encode(
    x="d:O", y="n:Q")
chart = alt.vconcat(line, hist, bars(d["hosts"], "hosts"), bars(d["prefixes"], "prefixes"),
                    bars(d["languages"], "languages"))
chart.save(sys.argv[2], inline=True)
'''


def serve_and_crawl(out: Path) -> Path:
    """Crawl sqlite3-doc from a local server into ``out`` (a ``neardup crawl --out`` directory)."""
    from scrapy_neardup.crawler.demo_site import LocalServer

    site = Path(tempfile.mkdtemp(prefix="report-bench-site-"))
    with tarfile.open(SITE) as tar:
        tar.extractall(site, filter="data")
    root = site / "sqlite3-doc" / "site"

    def page(target: str) -> tuple[int, dict[str, str], bytes]:
        path = (root / target.split("?")[0].lstrip("/")).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return 404, {"Content-Type": "text/plain"}, b"not found"
        ctype = "text/html; charset=utf-8" if path.suffix == ".html" else "application/octet-stream"
        return 200, {"Content-Type": ctype}, path.read_bytes()

    with LocalServer(page) as server:
        r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "crawl", f"{server.url}/index.html",
                            "--out", str(out), "-s", "NEARDUP_DROPPED_TEXT_BYTES=10000000"],
                           capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"the crawl failed: {r.stderr[-2000:]}")
    return out


def measure(name: str, crawl: Path, work: Path, altair: str | None) -> dict:
    out = work / f"{name}.html"
    read_s, build_s = [], []
    for _ in range(3):
        t = time.perf_counter()
        data = read(locate(crawl))
        read_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        size = build_report(crawl, out)
        build_s.append(time.perf_counter() - t)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "report", str(crawl), "-o", str(out)],
                       capture_output=True, text=True)
    command_s = time.perf_counter() - t
    assert r.returncode == 0, r.stderr
    row = {"name": name, "dropped": data.dropped, "avoided": data.avoided, "kept": data.kept,
           "bytes": size, "build_s": statistics.median(build_s), "read_s": statistics.median(read_s),
           "command_s": command_s, "build_over_read": statistics.median(build_s) / statistics.median(read_s)}
    uris = re.findall(r'src="(data:image/svg[^"]*)"', out.read_text())
    row["plots"], row["plot_bytes"] = len(uris), sum(map(len, uris))
    if altair:
        agg = {"kept": data.kept_times, "dropped": data.dropped_times, "avoided": data.avoided_times,
               "distances": sorted(data.distances.items()), "hosts": data.hosts.most_common(15),
               "prefixes": data.prefixes.most_common(15), "languages": data.languages.most_common(15)}
        (work / "agg.json").write_text(json.dumps(agg))
        (work / "altair_plots.py").write_text(ALTAIR)
        t = time.perf_counter()
        r = subprocess.run([altair, str(work / "altair_plots.py"), str(work / "agg.json"), str(work / "alt.html")],
                           capture_output=True, text=True)
        if r.returncode == 0:
            alt_html = (work / "alt.html").read_text()
            row["altair_bytes"] = len(alt_html.encode())
            row["altair_s"] = time.perf_counter() - t
            row["altair_needs_unsafe_eval"] = "new Function" in alt_html or "Function(" in alt_html
        else:
            row["altair_error"] = r.stderr[-500:]
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pages", type=int, default=100_000)
    p.add_argument("--crawl", type=Path, default=None, help="a sqlite3-doc crawl directory made before")
    p.add_argument("--altair", default="/work/peers/altair/bin/python")
    a = p.parse_args()
    altair = a.altair if Path(a.altair).exists() else None
    work = Path(tempfile.mkdtemp(prefix="report-bench-"))
    rows = []
    if a.crawl is not None or SITE.is_file():
        crawl = a.crawl or serve_and_crawl(work / "sqlite3-doc")
        rows.append(measure("sqlite3-doc", crawl, work, altair))
        print(json.dumps(rows[-1]), flush=True)
    t = time.perf_counter()
    synthetic = synthetic_crawl(work / "synthetic", a.pages)
    print(f"synthetic crawl directory of {a.pages:,} pages written in {time.perf_counter() - t:.1f} s", flush=True)
    rows.append(measure(f"synthetic-{a.pages // 1000}k", synthetic, work, altair))
    print(json.dumps(rows[-1]), flush=True)
    (ROOT / "bench" / "results" / "report.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
