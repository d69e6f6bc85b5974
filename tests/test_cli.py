"""The ``neardup`` command and the library's, run as real subprocesses: what
they answer, their exit codes (0 done, 1 could not be done, 2 asked wrongly),
their one-line errors on bad input, and that the commands that only read
never write."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_neardup.crawler.index import PageIndex
from scrapy_neardup.crawler.url_rules import RuleBook
from tests.conftest import ROOT, free_port
from tests.fixtures.pages import EN_PAGE
from tests.test_fingerprint import GOLDEN_EN


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scrapy_neardup.dedup", *args], capture_output=True, text=True,
                          timeout=120)


def neardup(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scrapy_neardup", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def one_line_error(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    """``r`` failed with ``code`` and said why in one line on stderr (no traceback), naming ``words``."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr[-3000:])
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)


# -- the library's commands ----------------------------------------------------------

def test_fingerprint_lines_and_exit_codes(tmp_path):
    a = tmp_path / "a.html"
    a.write_bytes(EN_PAGE)
    g = tmp_path / "b.html.gz"
    g.write_bytes(gzip.compress(EN_PAGE))
    short = tmp_path / "short.html"
    short.write_bytes(b"<p>hi</p>")
    missing = tmp_path / "missing.html"
    r = run("fingerprint", str(a), str(g), str(short), str(missing))
    assert r.stdout.splitlines() == [
        f"{GOLDEN_EN}\t{a}", f"{GOLDEN_EN}\t{g}", f"-\t{short}\ttoo_short",
        f"-\t{missing}\tunreadable: FileNotFoundError"]
    assert r.returncode == 1  # a file could not be read
    # every file read: 0, a page too short to fingerprint included (an answer, not a failure)
    assert run("fingerprint", str(a), str(short)).returncode == 0


def test_fingerprint_refuses_a_min_tokens_below_one(tmp_path):
    r = neardup("fingerprint", "--min-tokens", "-3", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "argument --min-tokens: must be a whole number >= 1, got '-3'" in r.stderr


def test_fingerprint_refuses_an_encoding_python_does_not_know(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<p>" + "near duplicate detection " * 10 + "</p>")
    one_line_error(neardup("fingerprint", "--encoding", "nosuchcodec", str(page)), 2, "'nosuchcodec'")


def test_distance():
    r = run("distance", "00000000000000ff", "000000000000000f")
    assert (r.returncode, r.stdout) == (0, "4\n")
    one_line_error(neardup("distance", "xyz", "0"), 2, "'xyz' is not a fingerprint")
    # what int() would take but a fingerprint never is: an underscore, other scripts' digits, a sign
    for odd in ("40f0_60b7e2882128", "\uff11\uff12", "+ff", " ff"):
        one_line_error(neardup("distance", odd, "0"), 2, "is not a fingerprint")


# -- the command itself ----------------------------------------------------------------

def test_help_lists_every_command_and_the_crawl_options():
    r = neardup("--help")
    assert r.returncode == 0
    for command in ("crawl", "search", "rules", "warmup", "fingerprint", "distance", "scheme"):
        assert f"neardup {command}" in r.stdout, command
    assert "-s NAME=VALUE" in r.stdout and "-a NAME=VALUE" in r.stdout
    assert all(arg in r.stdout for arg in ("allow", "deny", "max_depth", "max_pages", "stay_on_host"))
    assert "--limit" in r.stdout and "--min-evidence" in r.stdout and "--out DIR" in r.stdout


def test_help_into_a_closed_pipe_says_nothing_more():
    """``neardup --help | head -1``: the reader went away; no traceback (as with ``search``)."""
    proc = subprocess.Popen([sys.executable, "-m", "scrapy_neardup", "--help"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # (before the interpreter has started: its write meets a closed pipe)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err


def test_an_unknown_command_is_named_and_the_usage_shown():
    r = neardup("bogus")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("neardup: unknown command 'bogus'\n") and "neardup crawl" in r.stderr
    r = neardup()
    assert r.returncode == 2 and "give a command" in r.stderr and "neardup search" in r.stderr


# -- search ----------------------------------------------------------------------------

PAGES = [
    ("http://t.test/solpo", "Solpo harbour", "The harbour of Solpo opens at dawn. Fishermen sell their catch."),
    ("http://t.test/zuhor", "Zuhor market", "Zuhor has a market of spices; its traders come from Solpo by boat."),
    ("http://t.test/zh", "网页去重", "搜索引擎在抓取网页时会遇到大量内容几乎相同的页面"),
]


@pytest.fixture()
def index(tmp_path) -> Path:
    path = tmp_path / "out" / "index.sqlite3"
    idx = PageIndex(path)
    idx.add_many([(url, title, text, "0" * 16, "2026-01-01T00:00:00+00:00", 200) for url, title, text in PAGES])
    idx.close()
    return path


def hits(r: subprocess.CompletedProcess) -> set[str]:
    return {line.split()[1].rsplit("/", 1)[-1] for line in r.stdout.splitlines()}


@pytest.mark.parametrize("query,found", [
    ("Solpo", {"solpo", "zuhor"}),
    ("Solpo OR Zuhor", {"solpo", "zuhor"}),
    ("Solp*", {"solpo", "zuhor"}),
    ("Solpo NOT Zuhor", {"solpo"}),
    ("title:Solpo", {"solpo"}),
    ("NEAR(market spices, 2)", {"zuhor"}),
    ('"harbour of solpo"', {"solpo"}),
    ("(dawn OR boat) AND fishermen", {"solpo"}),
    ("内容几乎相同", {"zh"}),  # segmented as the indexed text is
])
def test_search_takes_the_fts5_syntax(index, query, found):
    r = neardup("search", str(index), query)
    assert r.returncode == 0, r.stderr
    assert hits(r) == found


def test_search_says_no_match_and_exits_1(index):
    r = neardup("search", str(index), "quokka")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.strip() == f"neardup search: no match for 'quokka' in {index}"


@pytest.mark.parametrize("query,problem", [
    ("(", "unbalanced ("),
    ('"unbalanced', 'unbalanced "'),
    ("Solpo OR", "fts5: syntax error"),
    ("author:Solpo", "no such column: author"),
])
def test_a_bad_query_is_one_line_saying_what_fts5_expects(index, query, problem):
    one_line_error(neardup("search", str(index), query), 2, f"bad query {query!r}", problem, "FTS5 expects")


def file_state(path: Path) -> tuple[str, list[str], bytes]:
    """What a reader must not change: the bytes, the tables, the journal mode (header bytes 18-19)."""
    data = path.read_bytes()
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    tables = sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master"))
    db.close()
    return hashlib.sha256(data).hexdigest(), tables, data[18:20]


def test_search_and_rules_read_only_and_only_their_own_kind(tmp_path, index):
    from scrapy_neardup.dedup import SimhashStore

    store = SimhashStore.open(tmp_path / "store")
    store.close()
    book_path = tmp_path / "store" / "url_rules.sqlite3"
    RuleBook(book_path).close()
    files = {"index": index, "store": tmp_path / "store" / "store.sqlite3", "book": book_path}
    before = {name: file_state(path) for name, path in files.items()}

    one_line_error(neardup("search", str(files["store"]), "foo"), 2, str(files["store"]),
                   "is a fingerprint store, not an index of kept pages")
    one_line_error(neardup("search", str(book_path), "foo"), 2, "is a URL rule book, not an index")
    one_line_error(neardup("rules", str(index)), 2, str(index), "is an index of kept pages, not a URL rule book")
    one_line_error(neardup("rules", str(files["store"])), 2, "is a fingerprint store, not a URL rule book")
    assert neardup("search", str(index), "Solpo").returncode == 0
    assert neardup("rules", str(book_path)).returncode == 0
    assert {name: file_state(path) for name, path in files.items()} == before


def test_search_and_rules_on_what_is_no_sqlite_file(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to have a header of sorts\n" * 4)
    for command in ("search", "rules"):
        extra = ("foo",) if command == "search" else ()
        one_line_error(neardup(command, str(text), *extra), 2, str(text), "is not an SQLite file")
        assert text.read_text().startswith("not a database")
    one_line_error(neardup("search", str(tmp_path), "foo"), 2, "is a directory, not an index")
    one_line_error(neardup("search", str(tmp_path / "none.sqlite3"), "foo"), 2, "no such file")
    one_line_error(neardup("rules", str(tmp_path / "none")), 2, "no URL rules at", "no such file or directory")
    one_line_error(neardup("rules", str(tmp_path)), 2, "no URL rules at")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing created


def test_rules_lists_pinned_rules_as_pinned_with_the_crawls_threshold(tmp_path):
    path = tmp_path / "url_rules.sqlite3"
    book = RuleBook(path, min_evidence=2, explore=0.0, pin=["suffix * /index.html /"], forbid=["param * ref"])
    for i in range(3):  # three agreeing pairs: active at the crawl's min_evidence=2, a candidate at 10
        book.observe(f"http://h.test/a{i}.html", 1000 + i)
        book.observe(f"http://h.test/a{i}.html?sid={i}", 1000 + i, duplicate_of=f"http://h.test/a{i}.html")
    book.close()
    r = neardup("rules", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = [re.match(r"(\w+) +\d+ agree +\d+ against +\d+ avoided  (.+)", line) for line in r.stdout.splitlines()]
    states = {m.group(2): m.group(1) for m in rows if m}
    assert states == {"suffix '*' /index.html /": "pinned", "param h.test sid": "active"}, r.stdout
    r = neardup("rules", str(tmp_path), "--min-evidence", "10")
    assert "candidate" in r.stdout and "pinned" in r.stdout


def test_a_shared_rule_book_on_redis_lists_its_pins_too(redis_url):
    RuleBook(redis_url, min_evidence=3, pin=["param * sid"]).close()
    r = neardup("rules", redis_url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "pinned" and r.stdout.rstrip().endswith("param '*' sid")


def test_rules_on_redis_without_the_redis_package_says_what_to_install():
    # (the package made unimportable in a real interpreter, as if it were not installed)
    code = ("import sys; sys.modules['redis'] = None; from scrapy_neardup.crawler.cli import main; "
            f"sys.exit(main(['rules', 'redis://127.0.0.1:{free_port()}/0']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    one_line_error(r, 2, "pip install 'scrapy-neardup[redis]'")


# -- crawl: checked before it starts ------------------------------------------------------

@pytest.mark.parametrize("args,words", [
    (["127.0.0.1:8701"], ["'127.0.0.1:8701'", "a URL needs http:// or https://"]),
    (["-a", "max_depth=abc"], ["-a max_depth must be a whole number >= 0, got 'abc'"]),
    (["-a", "max_pages=-1"], ["-a max_pages must be a whole number >= 1, got '-1'"]),
    (["-a", "stay_on_host=maybe"], ["-a stay_on_host must be true or false", "'maybe'"]),
    (["-a", "allow=("], ["-a allow must be a regular expression"]),
    (["-a", "max_page=1"], ["-a max_page: no such spider argument", "max_pages"]),
    (["-s", "NEARDUP_ENABLED=maybe"], ["-s NEARDUP_ENABLED must be a boolean", "'maybe'"]),
    (["-s", "NEARDUP_URL_RULES=maybe"], ["-s NEARDUP_URL_RULES must be a boolean"]),
    (["-s", "NEARDUP_STORE=http://example.com/"], ["NEARDUP_STORE takes a local path or a redis://", "http://"]),
    (["-s", "NEARDUP_MAX_DISTANCE=nine"], ["NEARDUP_MAX_DISTANCE must be an integer"]),
    (["-s", "NOVALUE"], ["-s takes NAME=VALUE"]),
])
def test_crawl_refuses_bad_input_in_one_line_before_it_starts(tmp_path, args, words):
    urls = [] if args[0].startswith("127") else [f"http://127.0.0.1:{free_port()}/"]
    r = neardup("crawl", *urls, *args, "--out", str(tmp_path / "out"), cwd=tmp_path)
    one_line_error(r, 2, *words)
    assert not (tmp_path / "out").exists() and not (tmp_path / "http:").exists()


def test_the_demo_never_removes_what_it_did_not_write(tmp_path):
    """``neardup crawl --out DIR`` with no URL (the demo) removed DIR whole, whatever it held."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("my thesis")
    one_line_error(neardup("crawl", "--out", str(out), cwd=tmp_path), 2, "thesis.txt", "a new or empty directory")
    assert (out / "thesis.txt").read_text() == "my thesis"
    # a directory of a demo's own outputs: cleared, and the demo runs again from nothing
    demo = tmp_path / "demo"
    for _ in range(2):
        r = neardup("crawl", "--out", str(demo), cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "store (0 fingerprints)" in r.stderr.replace(f"store {demo / 'store'} ", "store ")


def test_scrapy_crawl_names_a_bad_spider_argument(tmp_path):
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url=http://127.0.0.1:{free_port()}/",
           "-a", "stay_on_host=maybe", "-s", "LOG_LEVEL=INFO"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "SpiderArgumentError: stay_on_host must be true or false (or yes/no, on/off, 1/0), got 'maybe'" in r.stderr


# -- crawl: says when it did not do its job ----------------------------------------------

def test_a_crawl_whose_start_url_refuses_connections_fails_without_a_report(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/"
    r = neardup("crawl", url, "--out", str(tmp_path / "out"), "-s", "RETRY_ENABLED=False",
                "-s", "ROBOTSTXT_OBEY=False", "-s", "AUTOTHROTTLE_ENABLED=False", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert f"neardup crawl: no page could be fetched from {url} (DownloadConnectionRefusedError x1)" in r.stderr
    assert r.stdout == ""  # no "kept 0 pages" report


@pytest.mark.parametrize("case", ["robots", "offsite"])
def test_a_crawl_its_own_rules_leave_without_a_page_says_why(tmp_path, case):
    """robots.txt forbidding everything, or a start URL redirected to another host (example.com to
    www.example.com): "0 pages fetched" and exit 0, before."""
    from tests.fixtures.http import PageServer

    def page(target: str) -> tuple[int, dict[str, str], bytes]:
        if target == "/robots.txt":
            return 200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /\n" if case == "robots" else b""
        if target == "/moved":
            return 301, {"Location": server.url.replace("127.0.0.1", "localhost") + "/"}, b""
        return 200, {"Content-Type": "text/html"}, b"<p>" + b"a page of words to keep " * 10 + b"</p>"

    with PageServer(page) as server:
        r = neardup("crawl", f"{server.url}/" if case == "robots" else f"{server.url}/moved",
                    "--out", str(tmp_path / "out"), "-s", "AUTOTHROTTLE_ENABLED=False", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "no page could be fetched" in r.stderr
    assert ("forbidden by robots.txt" if case == "robots" else "off the site") in r.stderr, r.stderr[-2000:]


def test_a_crawl_that_cannot_open_its_store_fails_in_one_line_without_a_report(tmp_path):
    from scrapy_neardup.dedup import SimhashStore

    out = tmp_path / "out"
    SimhashStore.open(out / "store", max_distance=3).close()
    r = neardup("crawl", f"http://127.0.0.1:{free_port()}/", "--out", str(out), "-s", "NEARDUP_MAX_DISTANCE=4",
                cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == ""
    assert "neardup crawl: the crawl could not run: " in r.stderr and "max_distance=3, asked for 4" in r.stderr
    assert "NEARDUP_MAX_DISTANCE = 4" in r.stderr  # (the setting that disagrees, named)
    assert "Traceback" not in r.stderr


def test_max_pages_is_a_limit_on_the_pages_the_spider_and_filter_see(tmp_path):
    """``-a max_pages=3``: three pages reach the spider, three items at most; the
    responses in flight then are discarded unseen, and kept for the resume."""
    from scrapy_neardup.crawler.demo_site import DemoSite

    out = tmp_path / "out"
    with DemoSite().serve() as server:
        cmd = ("crawl", server.url, "--out", str(out), "-a", "max_pages=3", "-s", "AUTOTHROTTLE_ENABLED=False",
               "-s", "STATS_DUMP=True")
        r = neardup(*cmd, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "'finish_reason': 'max_pages'" in r.stderr
        feed = [json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()]
        dropped = (out / "store" / "duplicates.jsonl")
        verdicts = len(feed) + (len(dropped.read_text().splitlines()) if dropped.exists() else 0)
        assert 1 <= len(feed) and verdicts <= 3, (feed, r.stderr[-3000:])
        assert len(PageIndex(out / "index.sqlite3", readonly=True)) == len(feed)
        again = neardup(*cmd, cwd=tmp_path)  # the same command goes on: three more
        assert again.returncode == 0, again.stderr[-3000:]
    feed = [json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()]
    assert 3 < len(feed) <= 6 and len(set(feed)) == len(feed)


def test_neardup_crawl_of_urls_goes_on_where_it_stopped(tmp_path):
    """``neardup crawl URL`` keeps its JOBDIR in --out: run again after a stop, it
    resumes (nothing fetched twice but what was in flight) and the feed grows."""
    from tests.fixtures.dup_site import DupSite

    site = DupSite(n=30, delay=(0, 0.005))
    out = tmp_path / "out"
    with site.serve() as server:
        cmd = [sys.executable, "-m", "scrapy_neardup", "crawl", f"{server.url}/a/0.html", "--out", str(out),
               "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False"]
        first = subprocess.run(cmd + ["-s", "CLOSESPIDER_PAGECOUNT=8"], capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-2000:]
        assert "goes on where it stopped" in first.stdout, first.stderr[-2000:]
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-2000:]
        assert "'finish_reason': 'finished'" in second.stderr
        fetched_twice = [p for p, n in server.hits.items() if n > 1]
    assert len(fetched_twice) <= 4, fetched_twice  # (only what was in flight at the stop: 4 per domain)
    db = sqlite3.connect(out / "index.sqlite3")
    indexed = {u.split("/", 3)[3] for (u,) in db.execute("SELECT url FROM pages")}
    assert all(len({p.lstrip("/") for p in g} & indexed) == 1 for g in site.groups())
    feed = {json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()}
    assert len(feed) == len(site.groups())


@pytest.mark.parametrize("command", ["stats", "rules", "query"])
def test_a_shared_store_that_cannot_be_reached_is_not_done_not_asked_wrongly(command):
    """Exit 1 (it could not be done), not 2 (asked wrongly): the URL was right, its Redis was down."""
    where = f"redis://127.0.0.1:{free_port()}/0"
    args = [command, where] + (["--fingerprint", "0" * 16] if command == "query" else [])
    one_line_error(neardup(*args), 1, "127.0.0.1")
