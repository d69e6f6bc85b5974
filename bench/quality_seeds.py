"""How much of a quality figure is the luck of one hash: ``bench/quality.py`` under several hash seeds.

    .venv/bin/python bench/quality_seeds.py [--seeds 0-11] [--sets aeb,zh-cwced,generated] [--summarise-only]

A seed is another draw of the same scheme's hash functions (feature hashes
and language masks): the weights, and so the distance a pair has on average
over draws (``bench/spread_diagnosis.py``), do not change. Runs
``bench/quality.py --seed S --spread ''`` once per seed into
``bench/results/quality_seeds/seed_S.json`` (about a minute each, without
sqlite3-doc), then prints, per set, the recall of each J band at k = 3, the
precision and the pairs under J 0.5 within 3 bits: the default seed's, and the
mean, min and max over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "quality_seeds"


def seeds_of(text: str) -> list[int]:
    """``0-11`` or ``0,3,5``."""
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-11")
    ap.add_argument("--sets", default="aeb,zh-cwced,generated")
    ap.add_argument("--summarise-only", action="store_true", help="read the seeds' results already there")
    a = ap.parse_args()
    seeds = seeds_of(a.seeds)
    OUT.mkdir(parents=True, exist_ok=True)
    if not a.summarise_only:
        for s in seeds:
            with open(OUT / f"seed_{s}.log", "w") as log:
                subprocess.run([sys.executable, str(HERE / "quality.py"), "--sets", a.sets, "--spread", "",
                                "--seed", str(s), "--out", str(OUT / f"seed_{s}.json")], stdout=log, check=True)
    rows: dict[str, dict[int, dict]] = {}
    for s in seeds:
        path = OUT / f"seed_{s}.json"
        if not path.exists():
            continue
        for r in json.loads(path.read_text())["default"]:
            if r["set"] in a.sets.split(","):
                rows.setdefault(r["set"], {})[s] = r["by_k"]["3"]
    for name, by_seed in rows.items():
        print(f"{name} ({len(by_seed)} seeds: {sorted(by_seed)})")
        for key in ("recall_0.95", "recall_0.9", "recall_0.8", "precision", "pairs_below_0.5"):
            vals = [r[key] for r in by_seed.values() if r[key] is not None]
            if not vals:
                continue
            default = by_seed.get(0, {}).get(key)
            print(f"   {key:16s} seed 0 {default if default is None else round(default, 3)}  mean "
                  f"{statistics.mean(vals):.3f}  min {min(vals):.3f}  max {max(vals):.3f}")


if __name__ == "__main__":
    main()
