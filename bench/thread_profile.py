"""What the filter adds to the crawl's thread, from two profiles of it.

    .venv/bin/python bench/thread_profile.py PLAIN.prof FILTERED.prof [--top 40]

Reads two profiles that ``crawl_bench.py --profile DIR`` wrote (cProfile in
the reactor's thread, timed by that thread's CPU; each with its stats in a
``.json`` beside it) and prints, per response received:

* each crawl's total;
* the filter's own functions (``scrapy_neardup``) in the filtered crawl by
  their time with what they call (cumulative), each call of a generator or
  coroutine counted once per resumption, so a caller's figure may include
  what the spider's callback did inside it;
* every function whose own time per response grew most from the plain crawl
  to the filtered one: that is the filter's cost, wherever it is spent
  (Scrapy's stats, the standard library's URL parsing, SQLite).
"""

from __future__ import annotations

import argparse
import json
import pstats
import re
from pathlib import Path

Key = tuple[str, int, str]


def load(path: Path) -> tuple[dict[Key, tuple[float, float, int]], float, float]:
    """(function -> (own s, cumulative s, calls), total s, responses) of one profile."""
    st = pstats.Stats(str(path))
    raw: dict = st.stats  # type: ignore[attr-defined]
    funcs: dict[Key, tuple[float, float, int]] = {}
    for (file, line, func), (cc, nc, tt, ct, callers) in raw.items():
        key = (file, line, re.sub(r" at 0x[0-9a-f]+", "", func))  # (a built-in's address differs per run)
        was = funcs.get(key, (0.0, 0.0, 0))
        funcs[key] = (was[0] + tt, was[1] + ct, was[2] + nc)
    stats = json.loads(path.with_suffix(".json").read_text())
    return funcs, st.total_tt, stats["response_received_count"]  # type: ignore[attr-defined]


def name(key: Key) -> str:
    file, line, func = key
    for marker in ("site-packages/", "/lib/python3", "/crawler/", "/dedup/", "/bench/"):
        if marker in file:
            file = file.split(marker, 1)[1] if marker.endswith("/") and "python3" not in marker else \
                file[file.index(marker) + 1 :]
            break
    return f"{file}:{line}({func})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plain")
    ap.add_argument("filtered")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    plain, plain_total, plain_n = load(Path(a.plain))
    filt, filt_total, filt_n = load(Path(a.filtered))
    ms_p, ms_f = 1000 / plain_n, 1000 / filt_n
    print(f"total per response: plain {plain_total * ms_p:.3f} ms ({plain_n:.0f} responses), "
          f"filtered {filt_total * ms_f:.3f} ms ({filt_n:.0f}); difference {filt_total * ms_f - plain_total * ms_p:.3f} ms")
    print("\nthe filter's functions in the filtered crawl, ms per response (cumulative, own, calls per response):")
    ours = [(k, v) for k, v in filt.items() if "/crawler/" in k[0] or "/dedup/" in k[0] or "scrapy_neardup" in k[0]]
    for key, (tt, ct, nc) in sorted(ours, key=lambda kv: -kv[1][1])[: a.top]:
        print(f"  {ct * ms_f:7.3f} {tt * ms_f:7.3f} {nc / filt_n:7.1f}  {name(key)}")
    print("\nown time per response, filtered less plain (ms; calls per response plain -> filtered):")
    keys = set(plain) | set(filt)
    delta = []
    for key in keys:
        tp, _, np_ = plain.get(key, (0.0, 0.0, 0))
        tf, _, nf = filt.get(key, (0.0, 0.0, 0))
        delta.append((tf * ms_f - tp * ms_p, key, np_ / plain_n, nf / filt_n))
    delta.sort(key=lambda d: -d[0])
    for d, key, cp, cf in delta[: a.top]:
        print(f"  {d:+7.3f}  {cp:7.1f} -> {cf:7.1f}  {name(key)}")
    print(f"  ... sum of all positive: {sum(d for d, *_ in delta if d > 0):.3f}, "
          f"of all negative: {sum(d for d, *_ in delta if d < 0):.3f}")


if __name__ == "__main__":
    main()
