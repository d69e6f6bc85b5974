"""The worker's links (``dedup.fingerprint.links``) against Scrapy's ``LinkExtractor``, the oracle:
on the shared sites' real pages and on made-up edge cases, and in a real crawl of the ready spider."""

from __future__ import annotations

import tarfile

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from scrapy_neardup.dedup.fingerprint.jobs import fingerprint_job
from scrapy_neardup.dedup.fingerprint.links import LinkJob, LinkSpec, decodes_alike, scrapy_encoding
from tests.conftest import shared_path

SITES = ("sqlite3-doc", "debian-reference", "developers-reference", "installation-guide")


def spec_of(extractor: LinkExtractor) -> LinkSpec:
    return LinkSpec(tuple(r.pattern for r in extractor.allow_res), tuple(r.pattern for r in extractor.deny_res),
                    tuple(sorted(extractor.deny_extensions)))


def both(body: bytes, url: str = "http://example.com/dir/page.html", content_type: str = "text/html",
         extractor: LinkExtractor | None = None) -> tuple[list[str] | None, list[str]]:
    """(the worker's links, LinkExtractor's) of one page."""
    extractor = extractor or LinkExtractor()
    headers = {"Content-Type": content_type} if content_type else {}
    want = [link.url for link in extractor.extract_links(HtmlResponse(url, body=body, headers=headers))]
    got = fingerprint_job(body, None, 15, LinkJob(url, content_type, spec_of(extractor))).links
    return got, want


@pytest.mark.parametrize("site", SITES)
def test_the_same_links_as_link_extractor_on_real_pages(site):
    """Every third page of each shared site (all of them, 2,512 pages, were checked
    once: 2 differ). The one difference allowed, and checked to be it: a link after
    ``</html>``, which lexbor keeps in the body (as browsers do, HTML Standard tree
    construction) and libxml2 drops (2 sqlite3-doc pages)."""
    path = shared_path("sites", f"{site}.tar.gz")
    pages = differ = 0
    with tarfile.open(path) as tf:
        members = [m for m in tf if m.isfile() and m.name.endswith(".html")]
        for member in members[::3]:
            body = tf.extractfile(member).read()  # type: ignore[union-attr]
            url = "http://example.com/" + member.name.split("/site/", 1)[-1]
            got, want = both(body, url)
            pages += 1
            assert got is not None, member.name
            if got == want:
                continue
            differ += 1
            after_end = body[body.rfind(b"</html>"):]
            extra = [u for u in got if u not in want]
            assert extra and all(u.encode() in after_end for u in extra) and [u for u in got if u in want] == want, \
                (member.name, got, want)
    assert pages >= 10 and differ <= 2


EDGE_CASES = {
    "relative": b'<a href="a.html">a</a><a href="../b.html">b</a><a href="/c?x=1&amp;y=2">c</a><a href="?q">q</a>',
    "base href": b'<head><base href="http://other.org/base/"></head><a href="x.html">x</a><a href="/y">y</a>',
    "relative base": b'<head><base href="/sub/"></head><a href="x.html">x</a>',
    "schemes": b'<a href="javascript:void(0)">j</a><a href="mailto:a@b.c">m</a><a href="ftp://f.org/x">f</a>'
               b'<a href="tel:+1">t</a><a href="data:text/html,x">d</a><a href="//proto.org/rel">p</a>',
    "whitespace": b'<a href="  spaced.html \n">s</a><a href="\ttab.html">t</a><a href="">empty</a><a href=" ">blank</a>',
    "entities": b'<a href="a.html?x=1&amp;y=2&lt;">e</a><a href="&#x2F;slash">s</a><a href="caf&eacute;.html">c</a>',
    "fragments": b'<a href="#top">t</a><a href="page.html#s">s</a><a href="page.html#t">t</a><a href="page.html">p</a>',
    "duplicates": b'<a href="d.html">1</a><a href="d.html">2</a><a href="./d.html">3</a><area href="d.html">',
    "extensions": b'<a href="f.pdf">p</a><a href="f.PNG">i</a><a href="f.html">h</a><a href="f.zip?x=1">z</a>',
    "areas and others": b'<map><area href="area.html"></map><link href="style.css"><img src="i.png">'
                        b'<a name="anchor">n</a><a href="ok.html">o</a>',
    "non-ascii": '<a href="/wiki/Café">c</a><a href="http://bücher.de/x">i</a><a href="/q?s=ü">q</a>'.encode(),
    "bad urls": b'<a href="http://[::1">v6</a><a href="http://a b/">sp</a><a href="%zz">pct</a>',
    "no body": b"",
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_the_same_links_as_link_extractor_on_edge_cases(name):
    got, want = both(b"<html>" + EDGE_CASES[name] + b"</html>" if EDGE_CASES[name] else b"")
    assert got == want


@pytest.mark.parametrize("encoding, declared", [("cp1251", "meta"), ("latin-1", "header"), ("shift_jis", "meta"),
                                                ("utf-8", "none"), ("cp1252", "none")])
def test_the_same_links_in_other_encodings(encoding, declared):
    """A non-UTF-8 page's links are made safe in Scrapy's encoding, however it was declared
    (when the fingerprinting decoded it otherwise, the worker parses it again for them)."""
    href = {"cp1251": "/статья", "latin-1": "/café", "shift_jis": "/日本語", "utf-8": "/ü",
            "cp1252": "/naïve"}[encoding]
    meta = f'<meta charset="{encoding}">' if declared == "meta" else ""
    body = f'<html><head>{meta}</head><body><p>x</p><a href="{href}?q={href[1:]}">l</a></body></html>'.encode(encoding)
    got, want = both(body, content_type=f"text/html; charset={encoding}" if declared == "header" else "text/html")
    assert got == want and got


def test_allow_deny_as_the_spiders_arguments():
    body = b"<a href='/keep/1.html'>1</a><a href='/keep/no/2.html'>2</a><a href='/other/3.html'>3</a>"
    got, want = both(body, extractor=LinkExtractor(allow=r"/keep/", deny=r"/no/"))
    assert got == want == ["http://example.com/keep/1.html"]


def test_pages_the_worker_does_not_parse_have_no_links():
    """None: the spider extracts them itself (or, for a hostile page, does not)."""
    job = LinkJob("http://example.com/", "text/html", LinkSpec())
    assert fingerprint_job(b"<div" + b" a=1" * 5000 + b">x</div>", None, 15, job).links is None  # hostile
    assert fingerprint_job(b"%PDF-1.4 binary", None, 15, job).links is None
    assert fingerprint_job(b"  ", None, 15, job).links == []
    assert fingerprint_job(b"<a href=x>", None, 15).links is None  # (not asked)


def test_an_ascii_page_is_not_parsed_twice_and_a_second_parse_is_bounded(monkeypatch):
    # Scrapy infers "ascii" for an undeclared ASCII page that the fingerprint reads as UTF-8: one text,
    # so the fingerprint's tree serves; a stateful codec's escapes do not decode alike
    assert decodes_alike(b"<p>plain</p>", "ascii", "utf-8")
    assert not decodes_alike(b"a\x1b$B0!\x1b(Bz", "iso-2022-jp", "utf-8")
    assert not decodes_alike("é".encode(), "latin-1", "utf-8")
    # a second parse (another decoding) goes through the nesting bound, as the fingerprint's does
    import scrapy_neardup.dedup.fingerprint.links as links

    bounded = []
    monkeypatch.setattr(links, "bound_nesting", lambda data: bounded.append(len(data)) or data)
    body = "<p>é <a href='/x'>x</a></p>".encode("latin-1")
    result = fingerprint_job(body, None, 1, LinkJob("http://h/", "text/html; charset=latin-1", LinkSpec()))
    assert result.links == ["http://h/x"] and bounded


def test_scrapy_encoding_is_the_responses():
    for body, ctype in ((b"<meta charset=koi8-r><p>x", "text/html"), ("plain ü".encode("cp1252"), "text/html"),
                        (b"\xef\xbb\xbfbom", "text/html; charset=latin-1"), (b"ascii", "")):
        response = HtmlResponse("http://example.com/", body=body, headers={"Content-Type": ctype} if ctype else {})
        assert scrapy_encoding(body, ctype) == response.encoding


def test_the_ready_spider_follows_the_workers_links(tmp_path):
    """A real crawl of the demo site: the links of most pages come from the worker, and
    the crawl keeps and drops what it must, requesting no outlink of a dropped page. The
    site answers its front page at once and every other page once the crawl's log says
    the worker is up: until then pages are fingerprinted, and their links read, in the
    crawl's thread, and on a busy machine the worker may take longer to start than the
    whole crawl takes."""
    from scrapy_neardup.crawler.demo_site import DemoSite
    from tests.test_crawl import WORKER_UP, demo_site_after_the_worker, paths, read_jsonl, scrapy_crawl, stat

    s = DemoSite()
    log = tmp_path / "crawl.log"

    with demo_site_after_the_worker(s, log) as server:
        url = server.url + "/"
        r = scrapy_crawl(url, tmp_path, f"NEARDUP_STORE={tmp_path / 'store'}", log=log)
        requested = server.requests
    assert r.returncode == 0, r.stderr[-3000:]
    log_text = r.stderr
    assert WORKER_UP in log_text, log_text[-3000:]
    assert (stat(log_text, "neardup/links/from_worker") or 0) > (stat(log_text, "neardup/links/in_thread") or 0), \
        log_text[-3000:]
    items = read_jsonl(tmp_path / "pages.jsonl")
    assert paths([i["url"] for i in items], url) == sorted(s.expected_kept() | {"/short.html"})
    assert not s.never_requested() & set(requested)
