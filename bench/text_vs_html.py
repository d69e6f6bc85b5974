"""A page's visible text fingerprinted as text, against its HTML's fingerprint.

    .venv/bin/python bench/text_vs_html.py [--data ../shared/data] [--sets aeb,zh-cwced,...] [--out FILE]

``neardup dedup --text-field`` fingerprints a record's text through
``Fingerprinter.fingerprint_text``; a crawl fingerprints the page's HTML. A
corpus run with ``--store`` against a crawl's store compares the two, so the
same page given either way should land close. For every page of each set:
the Hamming distance between ``fingerprint_html(html)`` and
``fingerprint_text(visible text, title)`` (the visible text as the HTML path
extracts it, one block a line), and whether the two paths read the prose in
two languages (a flip: the language masks then put them ~32 bits apart).

Reports per set: pages, median / p95 / max distance, flips, and the flipped
pages (HTML language -> text language).

``--ablate``: which of the signals the markup gives and plain text does not
make the difference. The HTML path's own blocks are fingerprinted again with
one signal taken away at a time (the text path has all three away): no
listing characters (``pre``, ``code``...), no link characters, and plain
text's furniture rule (``text.plain``: lines of fewer than 4 words) in place
of the markup's (``nav``, ``header``...). Pages whose visible text the text
path cuts in other blocks than the HTML path are left out of it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402
from scrapy_neardup.dedup.simhash import hamming  # noqa: E402
from scrapy_neardup.dedup.text.page import ROW_CODE, ROW_FURNITURE, ROW_LINK, Page  # noqa: E402
from scrapy_neardup.dedup.text.plain import text_page  # noqa: E402

SITES = ("sqlite3-doc", "debian-reference", "developers-reference", "installation-guide")
SETS = ("aeb", "zh-cwced", *SITES)


def pages(data: Path, name: str) -> Iterator[tuple[str, bytes]]:
    """(name, HTML bytes) of every page of set ``name``."""
    if name == "aeb":
        for p in sorted((data / "aeb" / "html").glob("*.html.gz")):
            yield p.name, gzip.decompress(p.read_bytes())
    elif name == "zh-cwced":
        for p in sorted((data / "zh-cwced" / "original").glob("*.html")):
            yield p.name, p.read_bytes()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(data / "sites" / f"{name}.tar.gz") as tf:
                tf.extractall(tmp, filter="data")
            for p in sorted(Path(tmp).rglob("*.html")):
                yield str(p.relative_to(tmp)), p.read_bytes()


def measure(data: Path, name: str, fper: Fingerprinter) -> dict:
    distances: list[int] = []
    flips: list[tuple[str, str, str, int]] = []
    for page_name, html in pages(data, name):
        h = fper.fingerprint_html(html)
        if not h.ok:
            continue
        t = fper.fingerprint_text(h.page.text, h.page.title)
        if not t.ok:
            continue
        d = hamming(h.value, t.value)
        distances.append(d)
        if h.language != t.language:
            flips.append((page_name, h.language, t.language, d))
    d = np.array(distances)
    return {"pages": int(d.size), "median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
            "max": int(d.max()), "flips": len(flips), "flipped": flips}


#: the ablations of ``--ablate``: a name, and what it does to the HTML path's rows given the text path's
ABLATIONS = {
    "no listing characters": lambda rows, text_rows: _with(rows, ROW_CODE, 0),
    "no link characters": lambda rows, text_rows: _with(rows, ROW_LINK, 0),
    "plain text's furniture rule": lambda rows, text_rows: _with(rows, ROW_FURNITURE, text_rows[:, ROW_FURNITURE]),
    "all three (the text path)": lambda rows, text_rows: text_rows,
}


def _with(rows, column: int, values) -> np.ndarray:
    rows = rows.copy()
    rows[:, column] = values
    return rows


def ablate(data: Path, name: str, fper: Fingerprinter) -> dict[str, dict]:
    """Per ablation (``ABLATIONS``): median / p95 / max distance to the page's HTML fingerprint."""
    got: dict[str, list[int]] = {k: [] for k in ABLATIONS}
    for _, html in pages(data, name):
        h = fper.fingerprint_html(html)
        if not h.ok:
            continue
        page = h.page
        text_rows = text_page(page.text, page.title).rows
        if text_rows.shape != page.rows.shape:
            continue
        for what, change in ABLATIONS.items():
            r = fper.fingerprint_page(Page(page.title, text=page.text, rows=change(page.rows, text_rows)))
            if r.ok:
                got[what].append(hamming(r.value, h.value))
    return {what: {"pages": len(d), "median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
                   "max": int(max(d))} for what, d in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--list-flips", action="store_true", help="print every flipped page")
    ap.add_argument("--ablate", action="store_true", help="also the HTML path's blocks with one signal taken away")
    args = ap.parse_args()
    fper = Fingerprinter()
    out = {"scheme": fper.scheme, "sets": {}}
    print("| set | pages | median | p95 | max | language flips |")
    print("|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        r = measure(args.data, name, fper)
        out["sets"][name] = r
        print(f"| {name} | {r['pages']} | {r['median']:g} | {r['p95']:g} | {r['max']} | {r['flips']} |", flush=True)
        if args.list_flips:
            for row in r["flipped"]:
                print("   ", *row)
    if args.ablate:
        print("\n| set | the HTML path's blocks, with | pages | median | p95 | max |")
        print("|---|---|---|---|---|---|")
        for name in args.sets.split(","):
            rows = ablate(args.data, name, fper)
            out["sets"][name]["ablations"] = rows
            for what, r in rows.items():
                print(f"| {name} | {what} | {r['pages']} | {r['median']:g} | {r['p95']:g} | {r['max']} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
