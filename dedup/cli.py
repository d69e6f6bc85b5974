"""Command line: ``python -m dedup fingerprint PATH...``, ``distance HEX HEX``, ``scheme``, ``warmup``.

``fingerprint`` prints one line per file, ``<16 hex digits>\\t<PATH>``, or
``-\\t<PATH>\\t<reason>`` when the file gets no fingerprint (too short, empty,
unreadable); ``.html.gz`` files are read transparently. All files are done in
one process so the segmenter dictionary loads once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .fingerprint import DEFAULT_MIN_TOKENS, Fingerprinter, read_document
from .simhash import from_hex, hamming


def _cmd_fingerprint(args: argparse.Namespace) -> int:
    fper = Fingerprinter(min_tokens=args.min_tokens)
    out = sys.stdout
    failed = 0
    for path in args.paths:
        try:
            data = read_document(path)
        except (OSError, EOFError, ValueError) as exc:  # unreadable or corrupt .gz
            out.write(f"-\t{path}\tunreadable: {exc.__class__.__name__}\n")
            failed += 1
            continue
        r = fper.fingerprint_html(data, args.encoding)
        out.write(f"{r.hex}\t{path}\n" if r.ok else f"-\t{path}\t{r.reason}\n")
    return 1 if failed and failed == len(args.paths) else 0


def _cmd_distance(args: argparse.Namespace) -> int:
    try:
        a, b = from_hex(args.a), from_hex(args.b)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(hamming(a, b))
    return 0


def _cmd_scheme(args: argparse.Namespace) -> int:
    print(Fingerprinter().scheme)
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    from .jit import warm_all

    print(f"neardup: compiled kernels in {warm_all():.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dedup", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fingerprint", help="print the simhash of HTML files")
    p.add_argument("paths", nargs="+")
    p.add_argument("--encoding", default=None, help="encoding to assume instead of detecting")
    p.add_argument("--min-tokens", type=int, default=DEFAULT_MIN_TOKENS)
    p.set_defaults(func=_cmd_fingerprint)
    p = sub.add_parser("distance", help="Hamming distance of two hex fingerprints")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=_cmd_distance)
    p = sub.add_parser("scheme", help="print the fingerprint scheme identity")
    p.set_defaults(func=_cmd_scheme)
    p = sub.add_parser("warmup", help="compile the numba kernels now (see NUMBA_CACHE_DIR in the README)")
    p.set_defaults(func=_cmd_warmup)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
