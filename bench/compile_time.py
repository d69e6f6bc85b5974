"""Cold compile time of the numba kernels, on this machine, from an empty cache.

    .venv/bin/python bench/compile_time.py [--baseline-rev REV]

Runs each kernel group (``scrapy_neardup.dedup.jit.GROUPS``) alone in a fresh process with an
empty ``NUMBA_CACHE_DIR``, then ``scrapy_neardup.dedup.jit.warm_all`` (both groups at once,
one process each: what ``neardup warmup`` does), and reports wall seconds.
With ``--baseline-rev``, also the warm-up of that revision of the project
(checked out with ``git worktree`` into a temporary directory and run with
this virtualenv's Python), for a before/after in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(code: str, cwd: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {"NUMBA_CACHE_DIR": cache, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)}
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True)
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-rev", default=None)
    ap.add_argument("--out", default="bench/results/compile_time.json")
    a = ap.parse_args()
    result: dict[str, float] = {}
    for group in ("fingerprint", "store"):
        result[f"{group}_alone_s"] = round(timed(f"from scrapy_neardup.dedup import jit; jit.warm({group!r})", ROOT), 1)
        print(group, result[f"{group}_alone_s"], flush=True)
    result["warm_all_s"] = round(timed("from scrapy_neardup.dedup import jit; jit.warm_all()", ROOT), 1)
    print("both, two processes", result["warm_all_s"], flush=True)
    if a.baseline_rev:
        with tempfile.TemporaryDirectory(prefix="neardup-baseline-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), a.baseline_rev], cwd=ROOT, check=True,
                           capture_output=True)
            try:
                result["baseline_rev"] = a.baseline_rev  # type: ignore[assignment]
                result["baseline_warmup_s"] = round(
                    timed("from dedup.warmup import compile_kernels; compile_kernels()", tree), 1)
                print("baseline", result["baseline_warmup_s"], flush=True)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    print(json.dumps(result))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
