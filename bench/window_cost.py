"""What choosing a page's confirmation windows costs the worker process: ``fingerprint.window.page_head``
(the one window of 256 bytes, ``text_window``: the page's middle if that is its text, not its head or an
inline style, script or SVG, else another fraction of it; and a window of 16 bytes in each sixteenth
of the page that has text, ``slice_windows``), run for every page fetched whole while confirmation is
on. Per page, over the shared data's HTML (the Chinese pages, the sites' tarballs): the time, the
share of pages whose middle is not text, of those with no window of text, and the sixteenths with one.
Then what reading the answer to the multi-range GET of a copy of each page costs the crawl's thread
(``crawler.filter.byte_ranges``: the ``multipart/byteranges`` body nginx would send for its 16 windows,
parsed, and the windows taken from its parts).

    .venv/bin/python bench/window_cost.py [--data ../shared/data] [--out bench/results/window_cost.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy.http import Response  # noqa: E402

from scrapy_neardup.crawler.filter.byte_ranges import answered_parts, windows_in  # noqa: E402
from scrapy_neardup.dedup.fingerprint.window import SLICES, head_parts, head_ranges, page_head  # noqa: E402


def multipart_answer(body: bytes, ranges: list[tuple[int, int]]) -> Response:
    """The 206 answer nginx sends to a GET of ``ranges`` of ``body``: a ``multipart/byteranges`` body."""
    boundary = b"00000000000000000042"
    out = []
    for start, end in ranges:
        out.append(b"\r\n--" + boundary + b"\r\nContent-Type: text/html\r\nContent-Range: bytes %d-%d/%d\r\n\r\n"
                   % (start, end - 1, len(body)) + body[start:end])
    out.append(b"\r\n--" + boundary + b"--\r\n")
    return Response("http://h/p.html", status=206, body=b"".join(out),
                    headers={"Content-Type": b"multipart/byteranges; boundary=" + boundary})


def pages(data: Path) -> dict[str, list[bytes]]:
    """HTML bodies per set: each folder's ``*.html`` and each site tarball's."""
    out: dict[str, list[bytes]] = {}
    for d in sorted(p for p in data.iterdir() if p.is_dir()):
        got = [f.read_bytes() for f in sorted(d.rglob("*.html"))]
        if got:
            out[d.name] = got
    for tgz in sorted((data / "sites").glob("*.tar.gz")):
        with tarfile.open(tgz) as tf:
            out[tgz.name.removesuffix(".tar.gz")] = [tf.extractfile(m).read() for m in tf.getmembers()
                                                      if m.isfile() and m.name.endswith(".html")]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default="bench/results/window_cost.json")
    a = ap.parse_args()
    rows = []
    for name, bodies in pages(Path(a.data)).items():
        times, fractions, slices, parsed = [], [], [], []
        for body in bodies:
            t = time.perf_counter()
            head = page_head(body, 256)
            times.append(time.perf_counter() - t)
            ranges = head_ranges(head, 256, windows=SLICES) if head else []
            if len(ranges) > 1:
                answer = multipart_answer(body, ranges)
                t = time.perf_counter()
                got = windows_in(answered_parts(answer), ranges, len(body))
                parsed.append(time.perf_counter() - t)
                assert got == b"".join(body[a:b] for a, b in ranges)
            fractions.append(head_parts(head)[1] if head else None)
            slices.append(sum(1 for i in range(SLICES) if head >> 64 + 16 * i & 0xFFFF))
        rows.append({"set": name, "pages": len(bodies), "mean_kb": round(statistics.mean(map(len, bodies)) / 1e3, 1),
                     "us_mean": round(statistics.mean(times) * 1e6, 1), "us_max": round(max(times) * 1e6, 1),
                     "middle_not_text": round(sum(f != 128 for f in fractions) / len(bodies), 3),
                     "no_window": round(sum(f is None for f in fractions) / len(bodies), 3),
                     "slices_with_text_mean": round(statistics.mean(slices), 1),
                     "answer_us_median": round(statistics.median(parsed) * 1e6, 1) if parsed else None,
                     "answer_us_max": round(max(parsed) * 1e6, 1) if parsed else None})
        print(rows[-1], flush=True)
    Path(a.out).write_text(json.dumps({"command": " ".join(sys.argv), "sets": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
