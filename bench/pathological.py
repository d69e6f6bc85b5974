"""Fingerprinting time on pathological markup, with and without ``deep_nesting``.

    .venv/bin/python bench/pathological.py

Each page is fingerprinted once with the depth bound (as shipped) and once
with it switched off, in the same process; the other pathological pages
(huge, many tags, long words) are timed as shipped. Prints a Markdown table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup import Fingerprinter  # noqa: E402
from scrapy_neardup.dedup.text import visible as T  # noqa: E402

WORDS = b"near duplicate detection for web crawling with simhash fingerprints " * 3
DEEP = {
    "20,000 nested div": b"<div>" * 20_000 + WORDS + b"</div>" * 20_000,
    "50,000 nested div": b"<div>" * 50_000 + WORDS + b"</div>" * 50_000,
    "20,000 unclosed div, text in each": b"<div>words " * 20_000 + WORDS,
    "20,000 unclosed ul/li": b"<ul><li>item " * 20_000 + WORDS,
    "20,000 nested blockquote": b"<blockquote>" * 20_000 + WORDS + b"</blockquote>" * 20_000,
}
OTHER = {
    "20 MB of paragraphs": b"<p>lorem ipsum dolor sit amet consectetur adipiscing elit sed do</p>\n" * 300_000,
    "1,000,000 closed <b>": b"<b>x</b>" * 1_000_000,
    "one 1 MB word": b"<p>" + b"a" * 1_000_000 + b"</p>",
    "5 MB attribute": b"<p title='" + b"x" * 5_000_000 + b"'>" + WORDS + b"</p>",
    "1,000,000 Han characters": ("<p>" + "今天北京晴转多云最高气温二十五度明天有雨周末气温下降请注意添加衣物出行注意安全" * 25_000
                                 + "</p>").encode(),
}


def timed(fper: Fingerprinter, data: bytes) -> float:
    t = time.perf_counter()
    fper.fingerprint_html(data)
    return time.perf_counter() - t


def main() -> None:
    fper = Fingerprinter()
    fper.fingerprint_html(b"<div>" * 3000 + WORDS)  # compile and warm up
    bound = T.bound_nesting
    print("| page | size | bounded ms | unbounded ms | unbounded / bounded |")
    print("|---|---|---|---|---|")
    for name, data in DEEP.items():
        with_bound = timed(fper, data)
        T.bound_nesting = lambda data: data  # the parser sees the page as it is
        try:
            without = timed(fper, data)
        finally:
            T.bound_nesting = bound
        print(f"| {name} | {len(data) / 1e6:.2f} MB | {with_bound * 1e3:,.0f} | {without * 1e3:,.0f} | "
              f"{without / with_bound:,.0f}x |")
    print()
    print("| page | size | ms |")
    print("|---|---|---|")
    for name, data in OTHER.items():
        print(f"| {name} | {len(data) / 1e6:.2f} MB | {timed(fper, data) * 1e3:,.0f} |")


if __name__ == "__main__":
    main()
