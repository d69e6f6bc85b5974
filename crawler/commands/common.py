"""What every command shares: one-line failures, whole-number arguments, and the
layout ``neardup crawl --out DIR`` writes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def fail(command: str, message: str, code: int = 2) -> int:
    """Say why ``neardup COMMAND`` did not do its job, in one line on stderr; return ``code``."""
    print(f"neardup {command}: {message}", file=sys.stderr)
    return code


def whole(lo: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``lo``."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = lo - 1
        if number < lo:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {lo}, got {value!r}")
        return number
    return parse


def crawl_out_of_jobdir(path: Path) -> Path | None:
    """The ``neardup crawl --out DIR`` that ``path`` is the JOBDIR of (``DIR/job``, its store in
    ``DIR/store``), or None: that JOBDIR holds no store of its own (``neardup/`` has its runs only),
    so a reader of the crawl takes DIR."""
    if path.name == "job" and (path / "neardup").is_dir() and (path.parent / "store").is_dir():
        return path.parent
    return None
