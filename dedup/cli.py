"""Command line: ``python -m scrapy_neardup.dedup fingerprint PATH...``,
``distance HEX HEX``, ``scheme``, ``warmup`` (also ``neardup fingerprint ...``).

``fingerprint`` prints one line per file, ``<16 hex digits>\\t<PATH>``, or
``-\\t<PATH>\\t<reason>`` when the file gets no fingerprint (too short, empty,
unreadable); ``.html.gz`` files are read transparently. All files are done in
one process so the segmenter dictionary loads once. It exits 0 when every file
was read (a page too short to fingerprint is an answer, not a failure), 1 when
any could not be read, 2 on a bad argument. ``distance`` exits 2 on a bad
fingerprint.
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
    return 1 if failed else 0


def _cmd_distance(args: argparse.Namespace) -> int:
    fps = []
    for text in (args.a, args.b):
        try:
            fps.append(from_hex(text))
        except ValueError:
            print(f"{args.prog} distance: {text!r} is not a fingerprint (up to 16 hex digits)", file=sys.stderr)
            return 2
    a, b = fps
    print(hamming(a, b))
    return 0


def _cmd_scheme(args: argparse.Namespace) -> int:
    print(Fingerprinter().scheme)
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    from .jit import warm_all

    print(f"neardup: compiled kernels in {warm_all():.1f} s")
    return 0


def _min_tokens(value: str) -> int:
    """``--min-tokens``: a whole number >= 1 (a page needs a token to have a fingerprint)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value!r}")
    return number


def main(argv: Sequence[str] | None = None, prog: str = "python -m scrapy_neardup.dedup") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="the near-duplicate library's commands")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fingerprint", help="print the simhash of HTML files")
    p.add_argument("paths", nargs="+")
    p.add_argument("--encoding", default=None, help="encoding to assume instead of detecting")
    p.add_argument("--min-tokens", type=_min_tokens, default=DEFAULT_MIN_TOKENS,
                   help=f"fewer tokens than this: no fingerprint (default {DEFAULT_MIN_TOKENS})")
    p.set_defaults(func=_cmd_fingerprint)
    p = sub.add_parser("distance", help="Hamming distance of two hex fingerprints")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=_cmd_distance)
    p = sub.add_parser("scheme", help="print the fingerprint scheme identity")
    p.set_defaults(func=_cmd_scheme)
    p = sub.add_parser("warmup", help="compile the numba kernels now (where the cache goes: docs/compiled-code.md)")
    p.set_defaults(func=_cmd_warmup)
    args = parser.parse_args(argv)
    args.prog = prog
    try:
        return args.func(args)
    except BrokenPipeError:  # `... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
