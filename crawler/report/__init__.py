"""``neardup report``: what the filter did to a crawl, as one self-contained HTML file.

``sources`` finds a crawl's files and aggregates them (read-only), ``plots``
draws the plots (matplotlib, static SVG: the ``[report]`` extra), ``render``
writes the HTML (inline everything, no script, a strict Content-Security-Policy,
every page-derived string escaped), ``extension`` writes the report when a
crawl closes (``NEARDUP_REPORT``). ``build_report`` does it all.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .sources import Inputs, ReportInputError, locate, read

__all__ = ["Inputs", "ReportInputError", "build_report", "write_report"]


def write_report(inputs: Inputs, out: str | Path) -> int:
    """Write the report of ``inputs`` to ``out`` (atomically: a reader never sees
    half a file); returns its size in bytes. Raises ``ReportInputError`` for bad
    input, ``RuntimeError`` without matplotlib. O(duplicates lines + index rows).
    ``out`` "-" is standard output."""
    from .render import render

    text = render(read(inputs)).encode("utf-8")
    if str(out) == "-":
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()
        return len(text)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(text)


def build_report(path: str | Path, out: str | Path) -> int:
    """The report of the crawl (or ``neardup dedup`` output) at ``path``, written to ``out``."""
    return write_report(locate(path), out)
