"""``neardup report PATH -o report.html``: what the filter did to a crawl, as one HTML file."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from .common import fail


def report(path: str, out: str) -> int:
    """Write the report of ``path`` to ``out``: 0 written, 2 not a crawl (or a damaged file, no matplotlib)."""
    from ..report import ReportInputError, build_report

    # (a skipped line of the input is said on stderr, in the command's words)
    logging.basicConfig(format="neardup report: %(message)s", level=logging.WARNING)
    started = time.monotonic()
    try:
        size = build_report(path, out)
    except ReportInputError as exc:
        return fail("report", str(exc))
    except RuntimeError as exc:  # (matplotlib missing)
        return fail("report", str(exc))
    except OSError as exc:
        return fail("report", f"cannot write {out}: {exc.strerror or exc}")
    print(f"neardup report: wrote {'standard output' if out == '-' else out} ({size:,} bytes, {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup report", description=(
        "what the near-duplicate filter did to a crawl, as one self-contained HTML file (no script, nothing "
        "fetched): pages kept and dropped over time, distances, where the duplicates are, the largest clusters "
        "and what differs, requests avoided, learned URL rules, languages, runs and resumes. "
        "Exit status: 0 written, 2 not a crawl or a damaged file."))
    p.add_argument("path", help="a crawl's directory (neardup crawl --out), a store directory, a JOBDIR, a "
                                "duplicates file, or a neardup dedup output directory")
    p.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default report.html; - for standard "
                                                               "output)")
    a = p.parse_args(argv)
    return report(a.path, a.output)
