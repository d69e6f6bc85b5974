"""The pre-parse scan (``dedup.text.hostile_scan``): it turns away the pages
past its bounds, and no real page (the shared article and Chinese pages)."""

from __future__ import annotations

import gzip
import tarfile

import pytest

from scrapy_neardup.dedup import Fingerprinter
from scrapy_neardup.dedup.text.hostile_scan import MAX_ATTRIBUTES, MAX_DEPTH, MAX_ELEMENTS, hostile_reason
from tests.conftest import shared_path


def _tag(n: int, value: bytes = b"x") -> bytes:
    return b"<div " + b" ".join(b"data-a%d=%s" % (i, value) for i in range(n)) + b">"


def test_attributes_of_one_element_past_the_bound():
    assert hostile_reason(_tag(MAX_ATTRIBUTES) + b"words</div>") is None
    assert hostile_reason(_tag(MAX_ATTRIBUTES + 1) + b"words</div>") == \
        f"more than {MAX_ATTRIBUTES} attributes in one <div>"
    # valueless attributes, "/" between them, text before the tag, no ">" at the end
    page = b"<p>some text</p> more text " + b"<SPAN " + b"/".join(b"a%d" % i for i in range(5000))
    assert hostile_reason(page) == f"more than {MAX_ATTRIBUTES} attributes in one <span>"


def test_quoted_values_with_spaces_count_once():
    # one attribute whose value is thousands of words (a real page's <meta content="...">)
    page = b'<meta name="body" content="' + b"word " * 20_000 + b'"><p>text</p>'
    assert hostile_reason(page) is None
    assert hostile_reason(_tag(600, b'"a b c d e f"') + b"x") is None


def test_long_text_scripts_and_many_small_tags_are_not_hostile():
    assert hostile_reason(b"<p>" + b"lorem ipsum < dolor " * 250_000 + b"</p>") is None  # 5 MB, no ">"
    assert hostile_reason(b"<script>" + b"if (a < b) { x = y; } " * 100_000 + b"</script>") is None
    assert hostile_reason(b"a < b " * (MAX_ELEMENTS + 1)) is None  # "<" not followed by a letter


def test_nesting_past_the_bound():
    assert hostile_reason(b"<b>" * MAX_DEPTH) is None
    assert hostile_reason(b"<b>" * (MAX_DEPTH + 1)) == f"elements nested {MAX_DEPTH + 1} deep (more than {MAX_DEPTH})"
    assert hostile_reason(b"<html><body>" + b"<div>" * 1_000_000) is not None
    assert hostile_reason(b"<div>" * 300_000 + b"</div>" * 300_000) is not None  # closed, yet as deep
    # stray end tags first close nothing
    assert hostile_reason(b"</i>" * 400_000 + b"<i>" * (MAX_DEPTH + 1)) is not None
    # elements that never nest: void ones, and those the next of their kind closes
    assert hostile_reason(b"<br>" * (MAX_DEPTH + 1)) is None
    assert hostile_reason(b"<LI>item <img src=x>" * (MAX_DEPTH + 1)) is None
    assert hostile_reason(b"<div><span>x " * (MAX_DEPTH // 2 - 1)) is None  # (a hostile corpus page: fingerprinted)
    assert hostile_reason(b"<b>x</b>" * 1_000_000) is None  # many, yet flat


def test_elements_past_the_bound():
    assert hostile_reason(b"<br>" * (MAX_ELEMENTS + 1)) == f"{MAX_ELEMENTS + 1} elements (more than {MAX_ELEMENTS})"
    assert hostile_reason(b"<b>" * 3_000_000) == f"3000000 elements (more than {MAX_ELEMENTS})"  # 9 MB


@pytest.mark.parametrize("page", [_tag(200_000) + b"words " * 50 + b"</div>", b"<b>" * 3_000_000])
def test_the_fingerprinter_skips_a_hostile_page_without_parsing_it(page):
    r = Fingerprinter().fingerprint_html(page)
    assert r.value is None and r.reason is not None and r.reason.startswith("hostile: ")


def test_no_real_page_is_hostile():
    aeb = shared_path("aeb", "html")
    zh = shared_path("zh-cwced", "original")
    pages = [gzip.decompress(p.read_bytes()) for p in sorted(aeb.glob("*.html.gz"))]
    pages += [p.read_bytes() for p in sorted(zh.glob("*.html"))]
    assert len(pages) > 200
    assert [i for i, page in enumerate(pages) if hostile_reason(page) is not None] == []


def test_no_page_of_the_shared_sites_is_hostile():
    sites = sorted(shared_path("sites").glob("*.tar.gz"))
    seen = 0
    for site in sites:
        with tarfile.open(site) as tf:
            for member in tf:
                if member.isfile() and member.name.endswith((".html", ".htm")):
                    page = tf.extractfile(member).read()  # type: ignore[union-attr]
                    assert hostile_reason(page) is None, member.name
                    seen += 1
    assert seen > 1000
