"""The compiled visible-text scan against its plain-Python reference
(``dedup.text.visible_reference``), on real pages and on generated markup."""

from __future__ import annotations

import gzip
import tarfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_neardup.dedup.text import decode_html, extract, extract_text
from tests.conftest import shared_path


def _rows(page):
    return page.title, [(b.text, b.furniture, b.link_chars, b.n_words, b.n_han, b.code_chars) for b in page.blocks]


def _same(text: str) -> None:
    assert _rows(extract_text(text, compiled=True)) == _rows(extract_text(text, compiled=False))


TAGS = ["div", "p", "span", "a", "b", "nav", "footer", "li", "ul", "br", "hr", "img", "td", "table",
        "script", "style", "noscript", "template", "svg", "xmp", "textarea", "title", "button", "select",
        "option", "selectedcontent", "iframe", "plaintext", "section", "header", "custom-el", "pre", "form", "label",
        "math", "mi", "foreignObject", "desc", "frameset", "frame", "noembed", "noframes", "listing", "tr", "caption",
        "body", "html", "head", "object", "image", "aside", "menu", "dialog", "details", "summary",
        "text", "tspan", "code", "kbd", "samp"]
ATTRS = ['', ' href="/x"', " hidden", ' aria-hidden="true"', ' aria-hidden=" TRUE "', ' aria-hidden="false"',
         ' style="display:none"', ' style="color:red; DISPLAY : none"', ' style="visibility: hidden"',
         ' style="display:block"', ' role="navigation"', ' role="NAVIGATION"', ' role="main"',
         ' class="a>b"', " data-x='\"q\"'", ' title="&lt;p&gt;"']
TEXTS = ["word", "two words", "<!--", "-->", "<![CDATA[x]]>", "</", "<!doctype html>", "<?pi?>", " ", "\n\t ", "&amp;", "&lt;b&gt;", "&nbsp;", "\xa0", "\u3000", "\u2003", "\u2028",
         "中文", "网页“去重”——测试。", "a中b&amp;c", "x\u200ay\u2009", "\u1680", "\u205f", "\x85", "ｆ１、", "é", "x&y", "<!-- c <p> -->", "&quot;", "&#65;", "&#x4e2d;", "\x0c", "\x1c", "\r\n", "😀"]


@st.composite
def markup(draw):
    out = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            out.append(f"<{draw(st.sampled_from(TAGS))}{draw(st.sampled_from(ATTRS))}>")
        elif kind == 1:
            out.append(f"</{draw(st.sampled_from(TAGS))}>")
        else:
            out.append(draw(st.sampled_from(TEXTS)))
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(markup())
@example("<div><a></div><div><plaintext></div>")  # <plaintext> holding a reconstructed <a>
@example("</div><plaintext hidden><div>")  # a hidden <plaintext> whose text looks like a tag
@example("<div><template><plaintext></div></div><div><div>word")  # a <plaintext> in a <template>
@example("<div><script><!--<script>x</script>y</script>z</div>")  # "</script>" inside a script
def test_scan_matches_reference_on_generated_markup(text):
    _same(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_scan_matches_reference_on_arbitrary_text(text):
    _same(text)


def test_scan_matches_reference_on_real_pages():
    root = shared_path("aeb")
    for p in sorted((root / "html").glob("*.html.gz")):
        _same(decode_html(gzip.decompress(p.read_bytes()))[0])
    for p in sorted((shared_path("zh-cwced") / "original").glob("*.html")):
        _same(decode_html(p.read_bytes())[0])
    with tarfile.open(shared_path("sites") / "sqlite3-doc.tar.gz") as tf:
        members = [m for m in tf if m.name.endswith(".html")]
        for m in members:
            _same(decode_html(tf.extractfile(m).read())[0])


@pytest.mark.parametrize("html, text", [
    (b"<div>a<p hidden>x</p>c</div>", "ac"),  # hidden = absent, as display:none renders
    (b"<p>1 &lt; 2 &amp;&amp; 3 &gt; 2</p>", "1 < 2 && 3 > 2"),
    (b"<p>a&nbsp;&nbsp;b\xe3\x80\x80c</p>", "a b c"),  # U+00A0, U+3000 fold like spaces
    (b"<xmp><b>raw</b></xmp>", "<b>raw</b>"),
    (b"<p title='x>y'>after</p>", "after"),
    (b"<p>a<!-- <p>c</p> -->b</p>", "ab"),
    (b"<script>if (a < b) document.write('<p>x</p>')</script><p>y</p>", "y"),
    (b"<div>a<script><!--<script>x</script>y</script>b</div><p>c</p>", "ab\nc"),  # "</script>" inside a script
    (b"<div>a<template><plaintext></div><p>in the template to the end", "a"),
    (b"<p>x<plaintext><b>lit</b> &amp; <a>", "x\n<b>lit</b> &amp; <a>"),
])
def test_scan_cases(html, text):
    assert extract(html).text == text


@settings(max_examples=300, deadline=None)
@given(markup())
def test_parsing_without_mutation_events_gives_the_same_text(text):
    from selectolax.lexbor import LexborHTMLParser

    from scrapy_neardup.dedup.text.visible import parse_document, scan_page, serialise_for_scan

    data = text.encode("utf-8", "surrogatepass")
    with_events = scan_page(serialise_for_scan(LexborHTMLParser(data, scripting=True)), "", "utf-8")
    without = scan_page(serialise_for_scan(parse_document(data)), "", "utf-8")
    assert (with_events.text, with_events.rows.tolist()) == (without.text, without.rows.tolist())
