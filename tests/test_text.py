"""Visible-text extraction: what is kept, what is dropped, encodings, broken markup."""

from __future__ import annotations

import codecs
import gzip
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from w3lib.encoding import html_to_unicode

from scrapy_neardup.dedup.text import decode_html, extract, extract_text, sniff_encoding
import sys
from pathlib import Path

from tests.conftest import ROOT, shared_path
from tests.fixtures.pages import LEGACY_ENCODINGS, PARAGRAPHS, legacy_page


def test_drops_invisible_and_keeps_title_apart():
    html = b"""<!doctype html><html><head><title> My  Title </title><style>p{}</style>
    <script>var x = 'script text';</script></head><body>
    <p>Visible <b>bold</b> text</p><!-- a comment -->
    <noscript>noscript text</noscript><template><p>template text</p></template>
    <svg><text>svg text</text></svg>
    <div hidden>hidden attr</div><div aria-hidden="true">aria hidden</div>
    <div style="color:red; DISPLAY : none">display none</div>
    <span style="visibility:hidden">visibility hidden</span>
    <div aria-hidden="false">aria shown</div>
    <div>tail <span>inner</span> after</div></body></html>"""
    page = extract(html)
    assert page.title == "My Title"
    assert page.text == "Visible bold text\nsvg text\naria shown\ntail inner after"


@pytest.mark.parametrize("compiled", [True, False])
def test_an_svg_shows_the_words_of_its_text_elements(compiled):
    html = b"""<html><body><p>Syntax: <svg class="d"><title>tooltip</title><style>.x{}</style>
    <path d="M0 0"/><text x="9">NATURAL</text><g><text>LEFT <tspan>OUTER</tspan></text></g>
    <svg><text>JOIN</text></svg><desc>not drawn</desc></svg> is the operator.</p>
    <p><svg aria-hidden="true"><text>icon</text></svg>Icons hidden</p></body></html>"""
    page = extract(html, compiled=compiled)
    assert page.title == ""  # an <svg>'s <title> is not the page's
    assert page.text == "Syntax: NATURAL LEFT OUTER JOIN is the operator.\nIcons hidden"


@pytest.mark.parametrize("compiled", [True, False])
def test_a_formula_shows_its_tokens_not_its_annotations(compiled):
    html = b"""<p>The area is <math><semantics><mrow><mi>&pi;</mi><mo>&#x2062;</mo><msup><mi>r</mi><mn>2</mn></msup>
    </mrow><annotation encoding="application/x-tex">\\pi r^2</annotation><annotation-xml encoding="MathML-Content">
    <apply><times/><ci>pi</ci></apply></annotation-xml></semantics></math> square units.</p>"""
    assert extract(html, compiled=compiled).text == "The area is \u03c0 \u2062 r 2 square units."


def test_blocks_and_furniture_and_link_density():
    html = b"""<body><nav><a href="/a">Home</a> <a href="/b">About</a></nav>
    <article><h1>Head</h1><p>Body text here.</p></article>
    <div><a href="/x">only a link</a></div><footer>Copyright</footer></body>"""
    blocks = extract(html).blocks
    assert [(b.text, b.furniture) for b in blocks] == [
        ("Home About", True), ("Head", False), ("Body text here.", False),
        ("only a link", False), ("Copyright", True)]
    assert blocks[3].link_density == 1.0
    assert blocks[2].link_density == 0.0


def test_whitespace_normalised_and_br_splits():
    page = extract(b"<p>a\n\n   b\tc<br>d</p>")
    assert page.text == "a b c\nd"


@pytest.mark.parametrize("declared", [None, "gb2312"])
def test_gb2312_meta_declared_and_gbk_chars(declared):
    text = "<html><head><meta charset=gb2312><title>中文</title></head><body><p>镕基 是 GBK 才有的字</p></body></html>"
    data = text.encode("gbk")  # 镕 is not in GB2312 proper
    page = extract(data, declared)
    assert page.title == "中文"
    assert "镕基" in page.text


def test_undeclared_encoding_detected():
    body = "这是一个没有声明编码的中文网页，内容足够长以便检测编码。" * 20
    data = f"<html><body><p>{body}</p></body></html>".encode("gb18030")
    assert "中文网页" in extract(data).text


def _scores_by_pattern(data: bytes, codec: str) -> tuple[int, int, int, int] | None:
    """``cjk_codec_scores`` written with the patterns themselves (its table
    lookup must count the same characters)."""
    from scrapy_neardup.dedup.text.decode import _CJK_CODECS

    _, plausible, signature, _ = next(c for c in _CJK_CODECS if c[0] == codec)
    non_ascii = "".join(ch for ch in data.decode(codec, errors="replace") if ord(ch) >= 0x80)
    if not non_ascii:
        return None
    return (len(non_ascii), non_ascii.count("\ufffd"), len(plausible.findall(non_ascii)),
            len(signature.findall(non_ascii)) if signature is not None else 0)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("中文字网页，。「」ー日本語テストｱｲ한국어텍스트ㄱ abc😀𤨒é€Жж\u3000\ufffd"), max_size=60),
       st.sampled_from(["gb18030", "big5", "shift_jis", "euc-jp", "euc-kr", "cp1251"]))
def test_cjk_detection_counts_as_its_patterns(text, codec):
    from scrapy_neardup.dedup.text.decode import _CJK_CODECS, cjk_codec_scores

    data = text.encode(codec, errors="replace")
    for name, *_ in _CJK_CODECS:
        assert cjk_codec_scores(data, name) == _scores_by_pattern(data, name), name


@pytest.mark.parametrize(("lang", "codec"), LEGACY_ENCODINGS)
@pytest.mark.parametrize("repeat", [1, 4, 40])
def test_undeclared_legacy_encodings_decode_right(lang, codec, repeat):
    title = PARAGRAPHS[lang][:8]
    html = legacy_page(lang, repeat)
    page, truth = extract(html.encode(codec)), extract(html.encode("utf-8"))
    assert truth.title == title.strip()
    assert (page.title, page.text) == (truth.title, truth.text), sniff_encoding(html.encode(codec))


def test_chinese_pages_are_not_read_as_korean_or_japanese():
    """Chinese GBK reads cleanly as UHC more often than not, 40-55% of it as
    Hangul: the Korean share must stay out of its reach on real pages."""
    root = shared_path("zh-cwced")
    for p in sorted((root / "original").glob("*.html")):
        enc, _ = sniff_encoding(p.read_bytes())
        assert enc in ("utf-8", "gb18030"), p.name


def test_bom_wins_over_meta():
    data = b"\xef\xbb\xbf<meta charset=latin1><p>caf\xc3\xa9</p>"
    assert extract(data).text == "café"


def test_header_encoding_beats_meta():
    data = "<meta charset=utf-8><p>café</p>".encode("cp1252")
    assert extract(data, "cp1252").text == "café"
    assert decode_html(b"<p>x</p>", "no-such-codec")[0] == "<p>x</p>"


@pytest.mark.parametrize("data", [b"", b"   ", b"<", b"<html", b"\x00\x01\x02", b"<?xml version='1.0' encoding='utf-8'?><p>x</p>",
                                  b"<p>" * 3000 + b"deep", b"</div></div><p>unbalanced</span>"])
def test_broken_markup_does_not_raise(data):
    extract(data)


def test_zh_cwced_pages_decode_right():
    root = shared_path("zh-cwced")
    for p in sorted((root / "original").glob("*.html")):
        page = extract(p.read_bytes())
        clean = (root / "cleaned" / (p.stem + ".txt")).read_text(encoding="utf-8")
        han = [c for c in clean if "\u4e00" <= c <= "\u9fff"][:50]
        if han:
            visible = page.text
            assert sum(c in visible for c in han) >= 0.9 * len(han), p.name


def test_aeb_main_text_kept_on_a_sample():
    root = shared_path("aeb")
    truth = json.loads((root / "ground-truth.json").read_text())
    for key in sorted(truth)[:20]:
        page = extract(gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()))
        words = truth[key]["articleBody"].split()
        visible = " ".join(page.text.split())
        if words:
            kept = sum(w in visible for w in words[:200])
            assert kept >= 0.9 * min(len(words), 200), key


@pytest.mark.parametrize("depth", [300, 1500, 20000])
def test_deeply_nested_text_is_kept(depth):
    # the scan keeps its own stack: no recursion limit, no parser depth limit
    assert extract(b"<div>" * depth + b"deep text" + b"</div>" * depth).text == "deep text"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"", b"<meta charset=utf-8>", b"\xef\xbb\xbf"]))
@example(b"<p>\xc2\x00\x80</p>", b"")  # lexbor drops NUL before decoding: these bytes take the decoding path
def test_utf8_bytes_go_to_the_parser_as_decoding_would(data, prefix):
    # UTF-8 pages skip the decode/encode round trip: the result must be the same
    raw = prefix + data
    enc, skip = sniff_encoding(raw)
    if codecs.lookup(enc).name != "utf-8":
        return
    from scrapy_neardup.dedup.text.visible import _extract_as, _mostly_invalid

    # (``_extract_as``: the decision to read a page mostly of U+FFFD in another encoding is ``extract``'s)
    fast, slow = _extract_as(raw, enc, skip, None, None), extract_text(raw[skip:].decode("utf-8", "replace"))
    assert (fast.title, fast.text) == (slow.title, slow.text)
    if not _mostly_invalid(fast.text):  # (else ``extract`` may read it as its <meta> says, or as detected)
        whole = extract(raw)
        assert (whole.title, whole.text) == (slow.title, slow.text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([None, "gb2312", "utf-8", "latin-1", "bogus"]),
       st.sampled_from([b"", b"<meta charset=gbk>", b"<meta http-equiv=content-type content='text/html; charset=big5'>",
                        b"\xef\xbb\xbf", b"\xff\xfe"]))
def test_encoding_sniffing_agrees_with_w3lib(data, declared, prefix):
    raw = prefix + data
    content_type = None
    if declared and declared != "bogus":
        content_type = f"text/html; charset={declared}"
    from scrapy_neardup.dedup.text.decode import _detect

    assert decode_html(raw, declared)[::-1] == html_to_unicode(content_type, raw, auto_detect_fun=_detect)


@pytest.fixture(scope="module")
def guide_site(tmp_path_factory) -> Path:
    """The installation guide's pages, unpacked once for the module."""
    import tarfile

    into = tmp_path_factory.mktemp("guide")
    with tarfile.open(shared_path("sites", "installation-guide.tar.gz")) as tf:
        tf.extractall(into, filter="data")
    return into / "installation-guide" / "site"


def test_undeclared_western_pages_are_not_read_with_an_east_asian_codec(guide_site):
    """Real text in each of the guide's languages, written in its legacy code page with nothing declaring
    it (``bench/undeclared_encodings.py``): a Western page's accented letter and the byte after it read as
    one "plausible" Han character in GB18030 and Big5, so 121 of 659 such excerpts of 200 characters
    (29 of 36 German ones) came out as Chinese before the runs of characters beyond ASCII were counted.
    East Asian pages keep their codecs."""
    sys.path.insert(0, str(ROOT / "bench"))
    import undeclared_encodings as ue

    east_asian = []
    for lang, codec in ue.LEGACY.items():
        by_size = ue.samples(guide_site, lang, 12)
        for size, pages in by_size.items():
            if codec in ue.EAST_ASIAN and size is not None:
                continue  # (their whole pages below; their excerpts are few and short)
            for utf8 in pages:
                ok, found = ue.decoded_right(utf8, codec)
                if codec in ue.EAST_ASIAN:
                    assert ok, (lang, found)
                elif found in ue.EAST_ASIAN and lang not in ("ru", "el"):
                    east_asian.append((lang, size, found))
    # (not Russian and Greek: their letters, one byte each, come in runs as CJK characters do, and one
    # 200-character Russian excerpt of the guide's 36 still reads as GB18030, as it did before)
    assert east_asian == [], east_asian


def test_a_page_declared_in_an_encoding_it_is_not_in_is_read_as_detected():
    """A server's ``charset=utf-8`` over windows-1251 pages: every Cyrillic byte was U+FFFD, which makes no
    token, so distinct articles of one template were fingerprinted by their template alone, and dropped as
    near-duplicates of each other. Read mostly as U+FFFD, a page is read as detected instead; a UTF-8 page
    with a few stray bytes stays UTF-8."""
    words = "привет мир текст страница новости город человек время работа жизнь день рука дело глаз".split()
    body = " ".join(f"{w}{i}" for i, w in enumerate(words * 6))
    meta = '<meta charset="windows-1251">'
    page = f"<html><head>{meta}<title>Статья</title></head><body><p>{body}</p></body></html>".encode("cp1251")
    got = extract(page, "utf-8")  # (its <meta> says what it is in)
    assert "\ufffd" not in got.text and "привет0" in got.text and got.title == "Статья"
    # no <meta>: as detection reads it (here a guess of windows-1252: other letters, but one each, not U+FFFD)
    got = extract(page.replace(meta.encode(), b""), "utf-8")
    assert "\ufffd" not in got.text and len(got.text) == len(body)
    stray = ("<html><body><p>" + "a café and a naïve résumé " * 20 + "</p></body></html>").encode() + b"\xe9" * 5
    assert extract(stray, "utf-8").text.count("\ufffd") == 5
    # a UTF-8 page with stray bytes among letters of its own is not re-read as a stale <meta> says (it made
    # mojibake of every letter), nor as a <meta charset="utf-16"> (read as UTF-8, as the HTML Standard says)
    for meta in ("iso-8859-1", "utf-16"):
        text = "It’s what we don’t say " * 10
        page = (f'<html><head><meta charset="{meta}"><title>Quotes</title></head><body><p>{text}</p>'
                ).encode() + b"<p>" + b"\xa9 " * 16 + b"</p></body></html>"
        got = extract(page, "utf-8")
        assert got.title == "Quotes" and "It’s what we don’t say" in got.text, meta


@pytest.mark.parametrize("label", ["base64", "rot13", "hex", "zlib", "bz2", "quopri", "uu", "punycode", "cp037",
                                   "unicode_escape", "utf-7"])
def test_a_declared_codec_no_web_page_is_in_is_ignored(label):
    """Python knows codecs no browser does: declared in a header, ``base64`` or ``zlib`` made a page
    unparsable, ``punycode`` empty, and ``cp037`` (EBCDIC) read its bytes as other letters. They are ignored,
    as browsers ignore labels they do not know."""
    page = "<html><head><title>Les pages</title></head><body><p>Texte d'une page, café\\n</p></body></html>"
    got = extract(page.encode(), label)
    assert (got.title, got.text) == ("Les pages", "Texte d'une page, café\\n")
