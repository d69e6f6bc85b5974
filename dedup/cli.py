"""Command line: ``python -m scrapy_neardup.dedup fingerprint PATH...``,
``distance HEX HEX``, ``scheme``, ``warmup``, ``dedup INPUT... -o OUT``,
``query STORE (FILE | --fingerprint HEX)``, ``stats STORE`` (also
``neardup fingerprint ...``).

``dedup`` deduplicates a corpus (``corpus.CorpusRun``, docs/corpus.md): exit
0 done, 1 stopped by ``--strict`` at a bad record, an input not read to its end,
or every record bad, 2 a bad argument or an OUT that holds another run. ``query`` prints the stored records within k of
a file's or a fingerprint's (exit 1: none); ``stats`` a store's size, layout,
scheme, disk and memory.

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
from .simhash import from_hex, hamming, to_hex


def _cmd_fingerprint(args: argparse.Namespace) -> int:
    if args.encoding is not None:
        import codecs

        try:
            codecs.lookup(args.encoding)
        except LookupError:
            print(f"{args.prog} fingerprint: --encoding {args.encoding!r} is no encoding Python knows "
                  "(utf-8, cp1252, gb18030, shift_jis...)", file=sys.stderr)
            return 2
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


#: ``dedup`` options the Spark job does not take (``--engine spark`` refuses them), by destination
_NOT_ON_SPARK = {"workers": "--workers", "store": "--store", "strict": "--strict"}


def _spark_refusal(args: argparse.Namespace) -> str | None:
    """Why ``--engine spark`` cannot run these arguments (an option it does
    not take, an OUT it would mix with another run's), or None."""
    import os

    for dest, option in _NOT_ON_SPARK.items():
        if getattr(args, dest) not in (None, False):
            return f"{option} does not apply with --engine spark"
    from .spark.job import out_refusal

    if out_refusal(args.out) is not None:
        return f"-o {args.out}: --engine spark writes into an empty or new directory (no resume)"
    return None


def _dedup_done(args: argparse.Namespace, summary: dict) -> int:
    """A finished run's last words, either engine's: its counts (unless ``--quiet``), and exit 1 with a line
    when an input could not be read to its end (the run went on with the others; the summary names each)."""
    import json

    if not args.quiet:
        print(json.dumps({k: summary[k] for k in ("records", "kept", "dropped", "bad", "seconds", "docs_per_s")}))
    if summary["file_errors"]:
        print(f"{args.prog} dedup: {len(summary['file_errors'])} input file(s) could not be read to their end "
              f"(summary.json, file_errors): {summary['file_errors'][0]['error']}", file=sys.stderr)
        return 1
    if not summary["records"] and summary["bad"]:  # (a wrong --text-field: every record bad, none read)
        first = summary["bad_records"][0] if summary["bad_records"] else {}
        print(f"{args.prog} dedup: every record was bad ({sum(summary['bad'].values())}; summary.json, bad): "
              f"{first.get('reason', '')}", file=sys.stderr)
        return 1
    return 0


def _cmd_dedup_spark(args: argparse.Namespace) -> int:
    """``dedup --engine spark``: the Spark job (``spark.job.run``, docs/spark.md)."""
    import os

    refusal = _spark_refusal(args)
    if refusal:
        print(f"{args.prog} dedup: {refusal}", file=sys.stderr)
        return 2
    # the Python workers must run this interpreter, which has this package (unless the user chose one)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        import pyspark  # noqa: F401

        from .spark.job import field_options, run
    except ImportError as exc:
        print(f"{args.prog} dedup: --engine spark needs the [spark] extra: {exc}", file=sys.stderr)
        return 2
    from .corpus.inputs import InputError

    try:
        summary = run(args.inputs, args.out, master=args.spark_master, k=args.max_distance,
                      fields=field_options(args), output_format=args.format)
    except InputError as exc:  # an input that names nothing this reads
        print(f"{args.prog} dedup: {exc}", file=sys.stderr)
        return 2
    return _dedup_done(args, summary)


def _cmd_dedup(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.html_field and (args.title_field or args.language_field):  # (they were left unread, silently)
        print(f"{args.prog} dedup: --title-field and --language-field apply to --text-field records; with "
              "--html-field the page gives its title and its language is read from its text", file=sys.stderr)
        return 2
    if args.engine == "spark":
        return _cmd_dedup_spark(args)
    if args.spark_master is not None:
        print(f"{args.prog} dedup: --spark-master applies only with --engine spark", file=sys.stderr)
        return 2

    from .corpus import CorpusError, CorpusRun, DedupOptions, FieldOptions, RunStopped, StrictStop

    fields = FieldOptions(text_field=None if args.html_field else args.text_field, html_field=args.html_field,
                          id_field=args.id_field, title_field=args.title_field, url_field=args.url_field,
                          language_field=args.language_field, min_tokens=args.min_tokens)
    options = DedupOptions(inputs=args.inputs, out=args.out, fields=fields,
                           workers=0 if args.workers is None else args.workers,
                           max_distance=args.max_distance, store=args.store, strict=args.strict,
                           progress=not args.quiet, format=args.format)
    try:
        summary = CorpusRun(options).run()
    except RunStopped as exc:
        print(f"{args.prog} dedup: {exc}", file=sys.stderr)
        return 1
    except CorpusError as exc:
        print(f"{args.prog} dedup: {exc}", file=sys.stderr)
        return 2
    except StrictStop as exc:
        print(f"{args.prog} dedup: stopped (--strict) at a bad record: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # (its workers stop with it; what its last checkpoint holds is kept)
        print(f"\n{args.prog} dedup: interrupted; the same command resumes it", file=sys.stderr)
        return 130
    return _dedup_done(args, summary)


def _open_store_readonly(location: str, prog: str):
    """The store at ``location``, read-only; or, said on stderr, the exit status: 1 its Redis cannot be
    reached (asked rightly, not done), 2 no store there."""
    from .store import SimhashStore, StoreError, StoreUnavailable

    try:
        return SimhashStore.open(location, readonly=True)
    except (StoreError, OSError, ValueError) as exc:
        print(f"{prog}: cannot open the store {location}: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, StoreUnavailable) else 2


def _cmd_query(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.fingerprint is None):
        print(f"{args.prog} query: give a FILE or --fingerprint HEX (one of them)", file=sys.stderr)
        return 2
    if args.fingerprint is not None:
        try:
            fp = from_hex(args.fingerprint)
        except ValueError:
            print(f"{args.prog} query: {args.fingerprint!r} is not a fingerprint (up to 16 hex digits)",
                  file=sys.stderr)
            return 2
    else:
        from .corpus.inputs import kind_of

        if kind_of(args.file) in ("jsonl", "parquet", "warc"):  # (read as HTML: one meaningless fingerprint)
            print(f"{args.prog} query: {args.file} is a corpus file; query takes one document (an HTML file, or "
                  f".txt of plain text). A corpus is checked against a store by {args.prog} dedup {args.file} "
                  f"-o OUT --store {args.store}, which also adds its kept records to the store", file=sys.stderr)
            return 2
        try:
            data = read_document(args.file)
        except (OSError, EOFError, ValueError) as exc:
            print(f"{args.prog} query: cannot read {args.file}: {exc}", file=sys.stderr)
            return 2
        fper = Fingerprinter()
        if args.file.lower().endswith((".txt", ".txt.gz")):
            r = fper.fingerprint_text(data.decode("utf-8", "replace"))
        else:
            r = fper.fingerprint_html(data)
        if not r.ok:
            print(f"{args.prog} query: {args.file} has no fingerprint ({r.reason})", file=sys.stderr)
            return 1
        assert r.value is not None
        fp = r.value
    store = _open_store_readonly(args.store, f"{args.prog} query")
    if isinstance(store, int):
        return store
    with store:
        matches = store.query(fp)
        k, size = store.max_distance, len(store)
    for m in matches:
        print(f"{m.distance}\t{to_hex(m.fingerprint)}\t{m.key}")
    if not matches:  # (said, as a search with no match says it: exit 1 alone reads as a failure)
        print(f"{args.prog} query: no stored record within {k} bits of {to_hex(fp)} ({size:,} in {args.store})",
              file=sys.stderr)
    return 0 if matches else 1


def _cmd_stats(args: argparse.Namespace) -> int:
    import json
    import os

    store = _open_store_readonly(args.store, f"{args.prog} stats")
    if isinstance(store, int):
        return store
    with store:
        lay = store.layout
        n = len(store)
        disk = None
        if os.path.isdir(args.store):
            disk = sum(p.stat().st_size for p in __import__("pathlib").Path(args.store).rglob("*") if p.is_file())
        info = {"records": n, "max_distance": store.max_distance, "tables": lay.n_tables,
                "layout": lay.describe(), "scheme": store.scheme,
                "memory_bytes": int(lay.bytes_per_fingerprint() * n), "disk_bytes": disk}
    if args.duplicates:
        from collections import Counter

        from .corpus.drops_file import read_records

        path = args.duplicates
        by_distance: Counter = Counter()
        lines = ours = 0
        try:
            for record in read_records(path):
                lines += 1
                if record is None or "duplicate_of" not in record:
                    continue
                ours += 1
                d = record.get("distance")
                if isinstance(d, int):
                    by_distance[d] += 1
        except OSError as exc:
            print(f"{args.prog} stats: cannot read --duplicates {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        except ValueError as exc:  # (a damaged Parquet file, or no pyarrow to read one)
            print(f"{args.prog} stats: cannot read --duplicates {path}: {exc}", file=sys.stderr)
            return 2
        if lines and not ours:  # (an empty file is an empty crawl's; this one is not a duplicates file)
            print(f"{args.prog} stats: --duplicates {path} is not a duplicates file (no record of it names a "
                  "duplicate_of)", file=sys.stderr)
            return 2
        info["drops_by_distance"] = {str(k): v for k, v in sorted(by_distance.items())}
        info["duplicates_file"] = os.path.normpath(path)
    print(json.dumps(info, indent=2))
    return 0


def _workers(value: str) -> int:
    """``--workers``: a whole number >= 0 (0: every core)."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (0: every core), got {value!r}")
    return number


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
    p = sub.add_parser("dedup", help="deduplicate a corpus: JSON lines, HTML files, Parquet, WARC (docs/corpus.md)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs, in this order")
    p.add_argument("-o", "--out", required=True, help="the output directory (unique.jsonl, duplicates.jsonl, summary.json)")
    p.add_argument("--text-field", default="text", help="the field holding plain text (default: text)")
    p.add_argument("--html-field", default=None, help="the field holding HTML (instead of --text-field)")
    p.add_argument("--id-field", default=None, help="the field holding the record's id (default: FILE:LINE)")
    p.add_argument("--title-field", default=None, help="the field holding a title, weighed as a page's")
    p.add_argument("--url-field", default=None, help="the field holding a URL, written beside a drop")
    p.add_argument("--language-field", default=None, help="the field holding the language code (else detected)")
    p.add_argument("--workers", type=_workers, default=None, help="fingerprinting processes (default 0: every core)")
    p.add_argument("--max-distance", type=int, default=3, choices=range(0, 8), metavar="K",
                   help="drop within K bits of a kept record (default 3)")
    p.add_argument("--store", default=None, help="a store PATH or redis:// URL: dedup against it and add the kept")
    p.add_argument("--strict", action="store_true", help="stop at the first bad record")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line, warnings only")
    p.add_argument("--min-tokens", type=_min_tokens, default=DEFAULT_MIN_TOKENS,
                   help=f"fewer tokens than this: no fingerprint, kept (default {DEFAULT_MIN_TOKENS})")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                   help="the outputs as JSON lines (default) or Parquet: unique.parquet (the inputs' columns when "
                        "all are Parquet, else id, url, title, text) and duplicates.parquet; with --engine spark, "
                        "part files")
    p.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="local (default: this machine, resumable) or spark (the Spark job, docs/spark.md)")
    p.add_argument("--spark-master", default=None, metavar="URL",
                   help="with --engine spark: the Spark master (default: local[*], or spark-submit's)")
    p.set_defaults(func=_cmd_dedup)
    p = sub.add_parser("query", help="the stored records within k of a file or a fingerprint")
    p.add_argument("store", metavar="STORE", help="a store directory or redis:// URL")
    p.add_argument("file", nargs="?", default=None, metavar="FILE", help="an HTML file (.txt: plain text)")
    p.add_argument("--fingerprint", default=None, metavar="HEX")
    p.set_defaults(func=_cmd_query)
    p = sub.add_parser("stats", help="a store's size, layout, scheme, disk and memory, drops by distance")
    p.add_argument("store", metavar="STORE", help="a store directory or redis:// URL")
    p.add_argument("--duplicates", default=None, help="a duplicates file to count drops by distance from")
    p.set_defaults(func=_cmd_stats)
    args = parser.parse_args(argv)
    args.prog = prog
    try:
        return args.func(args)
    except BrokenPipeError:  # `... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
