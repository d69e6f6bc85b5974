"""Issue 27, section 4: the right twin is kept.

* A page's declared canonical URL (``<link rel=canonical>``, an HTTP ``Link``
  header) is recorded in the index and in the duplicates file; when the
  canonical URL is fetched later as a near-duplicate of the kept page, on the
  same host, the index row takes it. Across hosts, or between pages that are
  not near-duplicates, nothing changes. ``NEARDUP_CANONICAL_FIRST`` requests a
  kept page's canonical URL ahead.
* An exact copy served as ``application/octet-stream`` (Scrapy parses it as
  HTML) is checked, not passed as ``neardup/skipped/non_html``.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, TextResponse

from scrapy_neardup.crawler.canonical import declared_canonical
from scrapy_neardup.crawler.filter.unchecked import is_html
from scrapy_neardup.crawler.index import CanonicalFetched, PageIndex, PageRow
from tests.fixtures.http import PageServer
from tests.test_crawl import read_jsonl, scrapy_crawl, stat

_RNG = random.Random(27)
# (600 words: the text has no language the term table covers, so each word counts once, and one
# added word of 250 could move a page 4 bits)
_VOCAB = ["".join(_RNG.choice("bcdfgklmnprstvz") + _RNG.choice("aeiou") for _ in range(3)) for _ in range(3000)]
TEXTS = {name: " ".join(_RNG.choice(_VOCAB) for _ in range(600)) for name in ("x3", "h", "z", "zz", "o", "home")}


def html(title: str, text: str, links: tuple[str, ...] = (), head: str = "") -> bytes:
    nav = "".join(f'<a href="{u}">{u}</a> ' for u in links)
    return (f"<!doctype html><html><head><title>{title}</title>{head}</head><body><p>{text}</p>"
            f"<nav>{nav}</nav></body></html>").encode()


def canonical_tag(url: str) -> str:
    return f'<link rel="canonical" href="{url}">'


def page(target: str) -> tuple[int, dict[str, str], bytes]:
    h = {"Content-Type": "text/html; charset=utf-8"}
    pages = {
        # kept first; declares /articles/x3.html, which it links to: fetched next, a near-copy
        "/": (h, html("Home", TEXTS["home"], ("/canon/x3.html?utm=1", "/canon/h.html", "/canon/z.html",
                                               "/o.html"))),
        "/canon/x3.html?utm=1": (h, html("X3", TEXTS["x3"] + " shared", ("/articles/x3.html",),
                                         canonical_tag("/articles/x3.html"))),
        "/articles/x3.html": (h, html("X3", TEXTS["x3"], (), canonical_tag("/articles/x3.html"))),
        # the canonical URL in an HTTP Link header
        "/canon/h.html": ({**h, "Link": '</articles/h.html>; rel="canonical"'}, html("H", TEXTS["h"],
                                                                                    ("/articles/h.html",))),
        "/articles/h.html": (h, html("H", TEXTS["h"] + " more")),
        # declares a canonical URL whose page is another text: both kept, nothing taken
        "/canon/z.html": (h, html("Z", TEXTS["z"], ("/articles/z.html",), canonical_tag("/articles/z.html"))),
        "/articles/z.html": (h, html("Z2", TEXTS["zz"])),
        # an exact copy of /o.html served as application/octet-stream
        "/o.html": (h, html("O", TEXTS["o"], ("/copy/o.html",))),
        "/copy/o.html": ({"Content-Type": "application/octet-stream"}, html("O", TEXTS["o"], ("/copy/o.html",))),
    }
    if target in pages:
        headers, body = pages[target]
        return 200, headers, body
    return 404, {"Content-Type": "text/plain"}, b"not found"


def crawl(tmp_path: Path, *settings: str) -> tuple[str, dict[str, str | None], list[dict], str]:
    with PageServer(page) as server:
        r = scrapy_crawl(server.url, tmp_path, f"NEARDUP_INDEX={tmp_path / 'index.sqlite3'}",
                         f"NEARDUP_DUPLICATES_FILE={tmp_path / 'dups.jsonl'}", *settings)
        base = server.url.rstrip("/")
    assert r.returncode == 0, r.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    rows = {u[len(base):]: c and c[len(base):] for u, c in db.execute("SELECT url, canonical FROM pages")}
    db.close()
    dups = [{k: (v[len(base):] if isinstance(v, str) and v.startswith(base) else v) for k, v in d.items()}
            for d in read_jsonl(tmp_path / "dups.jsonl")]
    return base, rows, dups, r.stderr


def test_the_index_row_takes_its_declared_canonical_url(tmp_path):
    _, rows, dups, log = crawl(tmp_path)
    # /canon/x3.html?utm=1 was kept first; /articles/x3.html, the URL it calls canonical, came next as its
    # near-duplicate: the row is now the canonical URL's
    assert "/articles/x3.html" in rows and "/canon/x3.html?utm=1" not in rows
    assert rows["/articles/x3.html"] == "/articles/x3.html"
    assert "/articles/h.html" in rows and "/canon/h.html" not in rows  # (told by a Link header)
    # not near-duplicates: a canonical URL is a hint, never proof
    assert rows["/canon/z.html"] == "/articles/z.html" and rows["/articles/z.html"] is None
    assert stat(log, "neardup/canonical_taken") == 2
    # the drop lines, already written, stay; they say what the dropped page declared
    by_url = {d["url"]: d for d in dups}
    assert by_url["/articles/x3.html"]["duplicate_of"] == "/canon/x3.html?utm=1"
    assert by_url["/articles/x3.html"]["canonical"] == "/articles/x3.html"
    assert by_url["/articles/h.html"]["canonical"] is None
    # the octet-stream copy was checked, and dropped
    assert by_url["/copy/o.html"]["duplicate_of"] == "/o.html"
    assert stat(log, "neardup/skipped/non_html") is None


def test_canonical_first_requests_the_canonical_url_ahead(tmp_path):
    _, rows, _, log = crawl(tmp_path, "NEARDUP_CANONICAL_FIRST=True")
    assert stat(log, "neardup/canonical_requested") == 3
    assert "/articles/x3.html" in rows and "/articles/h.html" in rows


def test_take_canonical_needs_the_same_host_and_a_near_duplicate(tmp_path):
    index = PageIndex(tmp_path / "index.sqlite3")
    kept = PageRow("http://a.test/k", "K", "text", "00000000000000ff", "t", 200, "und", "http://a.test/c")
    other_host = PageRow("http://b.test/k", "K", "text", "00000000000000ff", "t", 200, "und", "http://a.test/c")
    index.add_many([kept, other_host])
    far = PageRow("http://a.test/c", "C", "text", "ffffffff000000ff", "t", 200, "und", None)
    assert not index.take_canonical(far, 3)  # not a near-duplicate
    near = far._replace(fingerprint="00000000000000f8")  # 3 bits from the kept page
    assert index.add_many([CanonicalFetched(near, 3)]) == 1
    assert index.urls() == ["http://a.test/c", "http://b.test/k"]  # (b.test's canonical is on another host)
    assert sorted(t for _, t, _ in index.search("text")) == ["C", "K"]
    index.close()


def test_an_older_index_gains_the_canonical_column(tmp_path):
    path = tmp_path / "index.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE pages (url TEXT PRIMARY KEY, title TEXT, text TEXT, fingerprint TEXT, "
               "fetched_at TEXT, status INTEGER, language TEXT)")
    db.execute("INSERT INTO pages VALUES ('http://a.test/', 't', 'x', '', '', 200, 'en')")
    db.commit()
    db.close()
    index = PageIndex(path)
    index.add_many([PageRow("http://a.test/2", "t", "x", "", "", 200, "en", "http://a.test/")])
    index.close()
    rows = sqlite3.connect(path).execute("SELECT url, canonical FROM pages ORDER BY url").fetchall()
    assert rows == [("http://a.test/", None), ("http://a.test/2", "http://a.test/")]


@pytest.mark.parametrize(("headers", "head", "expected"), [
    ({}, '<link rel="canonical" href="/c?a=1&amp;b=2#top">', "http://a.test/c?a=1&b=2"),
    ({}, "<LINK HREF='http://a.test/x' REL='alternate canonical'>", "http://a.test/x"),
    ({}, "<link rel=canonical href=/y>", "http://a.test/y"),
    ({}, '<link rel="stylesheet" href="/s.css">', None),
    ({}, '<link rel="canonical" href="javascript:void(0)">', None),
    ({"Link": '</s.css>; rel="preload", <https://a.test/h>; rel="canonical"'}, "", "https://a.test/h"),
])
def test_the_declared_canonical_url(headers, head, expected):
    body = f"<html><head>{head}</head><body><link rel='canonical' href='/body'></body></html>".encode()
    response = HtmlResponse("http://a.test/p/q", body=body, headers=headers, encoding="utf-8")
    assert declared_canonical(response) == expected  # (never the one after </head>)


def test_a_body_that_sniffs_as_html_is_html_whatever_its_type():
    body = b"<!doctype html><html><head><title>t</title></head><body>x</body></html>"
    assert is_html(TextResponse("http://a.test/x", body=body, headers={"Content-Type": "application/octet-stream"}))
    assert not is_html(TextResponse("http://a.test/x.txt", body=b"plain words",
                                    headers={"Content-Type": "text/plain"}))
