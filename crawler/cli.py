"""``neardup``: the command line (also ``python -m scrapy_neardup``). ``USAGE``
lists the commands; ``neardup COMMAND --help`` tells more of each. Each
command is a module of ``scrapy_neardup.crawler.commands`` (crawl, search,
rules) or the library's (``scrapy_neardup.dedup.cli``), imported only when run,
so that ``neardup --help`` loads no Scrapy.

``search`` and ``rules`` only read: they open their file read-only
(``sqlite_files``) and say so when it is not the kind of file they read.

Exit status, every command: 0 it did its job; 1 it ran but could not do it (a
crawl that could not run, stopped on an error or before its end, or fetched
no page; a search with no match; a file ``fingerprint`` could not read); 2 it
was asked wrongly (an unknown command, a bad argument, setting or query, a
file that is not what the command reads).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence

USAGE = """\
usage: neardup COMMAND [ARGS]

  neardup crawl [URL ...] [--out DIR] [-s NAME=VALUE]... [-a NAME=VALUE]...
      crawl these sites with the near-duplicate filter; no URL: serve the demo site on 127.0.0.1 and crawl it
      -s NAME=VALUE  a Scrapy or NEARDUP_* setting (repeatable)
      -a NAME=VALUE  a spider argument: allow, deny, max_depth, max_pages, stay_on_host (repeatable)
  neardup search INDEX QUERY... [--limit N]
      search the index of kept pages; FTS5 syntax: words, "a phrase", prefix*, AND/OR/NOT, NEAR(a b), title:word
  neardup rules FILE|DIR|URL [--min-evidence N]
      the URL rules a crawl learned: its url_rules.sqlite3, a directory holding it (--out, the store,
      JOBDIR), or the shared store's redis:// URL
  neardup dedup INPUT... -o OUT [--text-field F | --html-field F] [--id-field F] [--workers N] [--store S]
      deduplicate a corpus (JSON lines .jsonl/.gz/.zst, HTML files, Parquet, WARC): OUT/unique.jsonl,
      OUT/duplicates.jsonl, OUT/summary.json; resumable; more options: neardup dedup --help
  neardup query STORE (FILE | --fingerprint HEX)   the stored records within k, with distances and keys
  neardup stats STORE [--duplicates FILE]          a store's size, layout, scheme, disk and memory
  neardup report PATH [-o report.html]
      what the filter did to a crawl, as one self-contained HTML file: PATH is a crawl's --out, a store,
      a JOBDIR, a duplicates file or a neardup dedup output
  neardup warmup                      compile the numba kernels now (else the first crawl does, off its thread)
  neardup fingerprint PATH... [--encoding ENC] [--min-tokens N]
                                      print the simhash of HTML files (.html.gz too)
  neardup distance HEX HEX            the Hamming distance of two fingerprints
  neardup scheme                      the fingerprint scheme's identity
  neardup --version                   the installed version

'neardup COMMAND --help' tells more. Exit status: 0 done; 1 could not be done (a crawl that failed or
fetched nothing, no match, an unreadable file); 2 asked wrongly (bad command, argument, setting, query
or file)."""


# -- the command -----------------------------------------------------------------------

def _library(name: str) -> Callable[[list[str]], int]:
    """``neardup NAME ...``: the library's command (``scrapy_neardup.dedup.cli``)."""
    def command(argv: list[str]) -> int:
        from scrapy_neardup.dedup.cli import main as dedup_main

        return dedup_main([name, *argv], prog="neardup")
    return command


def _ours(name: str) -> Callable[[list[str]], int]:
    """``neardup NAME ...``: ``scrapy_neardup.crawler.commands.NAME.command``."""
    def command(argv: list[str]) -> int:
        module = importlib.import_module(f".commands.{name}", __package__)
        return module.command(argv)
    return command


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    **{name: _ours(name) for name in ("crawl", "search", "rules", "report")},
    **{name: _library(name) for name in ("warmup", "fingerprint", "distance", "scheme", "dedup", "query", "stats")},
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # `neardup search ... | head`, `neardup --help | head`
        # (nothing more can be said; Python's exit flush must not complain about stdout either)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stderr.close()
        return 0


def _main(argv: list[str]) -> int:
    if not argv:
        print(f"neardup: give a command\n\n{USAGE}", file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if cmd in ("-V", "--version"):
        from scrapy_neardup import __version__

        print(f"neardup (scrapy-neardup) {__version__}")
        return 0
    command = COMMANDS.get(cmd)
    if command is None:
        print(f"neardup: unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return command(rest)
