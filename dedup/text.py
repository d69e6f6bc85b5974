"""Visible text from HTML bytes.

``extract(html_bytes)`` decodes the page (BOM, else declared encoding, else
``<meta charset>``, else detection; UTF-8 pages are not decoded in Python,
GB18030 ones are transcoded by ``gb_transcode``) and reads the tree a browser
builds by the HTML Standard's tree construction: most pages in one compiled
pass over the bytes (``raw_scan``), the others parsed by lexbor (selectolax),
whose serialisation ``html_scan`` reads once; both give the same result
(tested). It keeps only what a reader would see:

* dropped whole: ``DROPPED_TAGS`` (``script style noscript template svg head``
  and the like; the ``<title>`` is kept apart), comments, processing
  instructions, and hidden elements (``hidden`` attribute, ``aria-hidden="true"``,
  inline ``display:none`` or ``visibility:hidden``), which count as absent, as
  ``display: none`` renders;
* block-level elements start new lines; whitespace is normalised.

Besides the text, the scan records *blocks* (one per block-level run of
text) with their link density, words, Han characters and whether they sit in
page furniture (``nav header footer aside`` or the matching ARIA roles). The
fingerprint features use this to damp navigation and templates; the visible
text itself keeps everything a reader sees.

Cost: O(size of the page): one compiled pass, or one parse, one serialisation
and one compiled scan.

>>> page = extract(b"<html><title>T</title><body><p>Hello <b>world</b></p>"
...                b"<script>x()</script><div hidden>secret</div></body></html>")
>>> page.title, page.text
('T', 'Hello world')
"""

from __future__ import annotations

import codecs
import logging
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import regex
from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, to_unicode

from . import html_scan, raw_scan
from .deep_nesting import bound_nesting
from .gb_transcode import gb_to_utf8

logger = logging.getLogger(__name__)

#: Elements whose whole subtree is never visible text.
DROPPED_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "head", "math", "iframe",
     "object", "embed", "canvas", "select", "datalist", "button", "noembed", "noframes"}
)
#: Elements that start a new line (a new block) when rendered.
BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "br", "caption", "center", "dd",
     "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer",
     "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "li",
     "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
     "td", "tfoot", "th", "thead", "tr", "ul", "option", "legend", "label",
     "marquee"}  # (inline-block when rendered; also what deep_nesting renames blocks to)
)
#: Page furniture: navigation, banners, footers, sidebars.
FURNITURE_TAGS = frozenset({"nav", "header", "footer", "aside", "menu"})
FURNITURE_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu", "menubar"})

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_WS = re.compile(r"\s+")
_TAG_TABLE = html_scan.tag_table(BLOCK_TAGS, FURNITURE_TAGS, DROPPED_TAGS)
_ROLE_TABLE = html_scan.role_table(FURNITURE_ROLES)


@dataclass(slots=True)
class Block:
    """One block-level run of visible text."""

    text: str
    link_chars: int = 0  # characters of ``text`` that sit inside <a href>
    furniture: bool = False  # inside nav/header/footer/aside or an ARIA landmark for them
    #: words (white-space separated) and Han characters of ``text``; -1: count them from the text
    n_words: int = -1
    n_han: int = -1

    @property
    def link_density(self) -> float:
        return self.link_chars / len(self.text) if self.text else 0.0


# stdlib re with explicit ranges: much faster than regex's \p{Han} for counting
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


class Page:
    """What ``extract`` returns: the title, the visible text (blocks separated
    by newlines) and one row per block in ``rows``, an (m, 6) int64 array:
    start and end of the block in ``text``, furniture (0/1), link characters,
    words, Han characters. ``blocks`` gives the same as ``Block`` objects.

    The features read ``rows`` as arrays; a Page made from ``Block`` objects
    gets its rows from them.
    """

    __slots__ = ("title", "text", "rows", "encoding", "_blocks", "nfkc_clean")

    def __init__(self, title: str = "", blocks: list[Block] | None = None, encoding: str = "utf-8", *,
                 text: str = "", rows: np.ndarray | None = None, nfkc_clean: bool = False) -> None:
        self.title = title
        #: True when ``text`` is known to be NFKC but for separators (``dedup.nfkc``)
        self.nfkc_clean = nfkc_clean
        self.encoding = encoding
        self._blocks = list(blocks) if blocks is not None else None
        if blocks is not None:
            text, rows = _text_and_rows(self._blocks)
        self.text = text
        self.rows = rows if rows is not None else np.zeros((0, 6), dtype=np.int64)

    @property
    def blocks(self) -> list[Block]:
        if self._blocks is None:
            text = self.text
            self._blocks = [Block(text[start:end], link, bool(furniture), words, han)
                            for start, end, furniture, link, words, han in self.rows.tolist()]
        return self._blocks

    def __repr__(self) -> str:
        return f"Page(title={self.title!r}, blocks={len(self.rows)}, chars={len(self.text)})"


def _text_and_rows(blocks: list[Block]) -> tuple[str, np.ndarray]:
    rows = np.zeros((len(blocks), 6), dtype=np.int64)
    pos = 0
    for i, b in enumerate(blocks):
        words = b.n_words if b.n_words >= 0 else len(b.text.split())
        han = b.n_han if b.n_han >= 0 else len(HAN.findall(b.text))
        rows[i] = (pos, pos + len(b.text), b.furniture, b.link_chars, words, han)
        pos += len(b.text) + 1
    return "\n".join(b.text for b in blocks), rows


def sniff_encoding(data: bytes, encoding: str | None = None) -> tuple[str, int]:
    """``(encoding, BOM length)`` of HTML bytes, without decoding them.

    Order, as in browsers: a BOM, then the caller's declared encoding (e.g.
    from a Content-Type header), then ``<meta charset>`` / ``http-equiv``,
    then detection. w3lib maps legacy labels to their supersets as browsers
    do (gb2312 -> gb18030, iso-8859-1 -> cp1252), which is what makes gb2312
    pages with GBK-only characters decode right.
    """
    bom_enc, bom = read_bom(data)
    if bom_enc is not None and bom is not None:
        return bom_enc, len(bom)
    enc = None
    if encoding:
        try:
            codecs.lookup(encoding)
            enc = http_content_type_encoding(f"text/html; charset={encoding}")
        except LookupError:
            logger.debug("unknown declared encoding %r, ignoring it", encoding)
    enc = enc or html_body_declared_encoding(data) or _detect(data) or "utf-8"
    if enc in ("utf-16", "utf-32"):
        enc += "-be"
    return enc, 0


def decode_html(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode HTML bytes; returns ``(text, encoding_used)``. See ``sniff_encoding``."""
    enc, skip = sniff_encoding(data, encoding)
    return to_unicode(data[skip:], enc), enc


#: punctuation and symbols (other than U+FFFD) are plausible in any script
_PUNCT = r"\p{P}\p{Sm}\p{So}\p{Sk}\p{Sc}--\ufffd"
#: Multi-byte East Asian codecs tried before generic detection: (codec,
#: characters a real page in it is mostly made of beyond ASCII, characters only
#: its language writes much of, the least share of those). Half-width katakana
#: and Hangul count as implausible: they are what other codecs' bytes turn
#: into when read as Shift_JIS or UHC, and real pages seldom use them.
_FULLWIDTH = r"\u3000-\u303f\uff00-\uff60\uffe0-\uffef"
_CJK_CODECS = (
    ("gb18030", regex.compile(r"[\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1), None, 0.0),
    ("big5hkscs", regex.compile(r"[\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1), None, 0.0),
    # Japanese writes kana between its kanji: a page without them is Chinese
    # read with a Japanese codec (GB2312 and EUC-JP share their kana rows, so
    # EUC-JP text also reads as GB18030, with the same kana and wrong kanji).
    ("cp932", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}" + _FULLWIDTH + _PUNCT + "--\uff61-\uff9f]", regex.V1),
     regex.compile(r"[\p{Hiragana}\p{Katakana}--\uff61-\uff9f]", regex.V1), 0.1),
    ("euc_jp", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}" + _FULLWIDTH + _PUNCT + "--\uff61-\uff9f]", regex.V1),
     regex.compile(r"[\p{Hiragana}\p{Katakana}--\uff61-\uff9f]", regex.V1), 0.1),
    # Korean is mostly Hangul syllables; EUC-KR's Hangul rows are GB2312's
    # commonest Hanzi, so Korean also reads as plausible GB18030, and Chinese
    # reads as 40-55% Hangul in UHC (measured on zh-cwced's GBK pages).
    ("cp949", regex.compile(r"[\p{Hangul}\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1),
     regex.compile(r"[\uac00-\ud7a3]"), 0.8),
)
#: the lead bytes of kana (hiragana, katakana) in the Japanese codecs
_KANA_LEADS = {"cp932": (0x82, 0x83), "euc_jp": (0xA4, 0xA5)}
#: ISO-2022 escape sequences: a 7-bit Japanese or Korean page (all ASCII bytes)
_ISO_2022 = ((re.compile(rb"\x1b\$[@B]|\x1b\(J|\x1b\$\(D"), "iso2022_jp_ext"), (re.compile(rb"\x1b\$\)C"), "iso2022_kr"))


@lru_cache(maxsize=None)
def _bmp_table(pattern: regex.Pattern) -> np.ndarray:
    """Which BMP code points a one-character pattern matches, as a bool array:
    a page's characters are looked up at once instead of scanned by the
    pattern (~100x faster on a Chinese page)."""
    cps = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars = "".join(map(chr, cps))
    table = np.zeros(0x10000, dtype=bool)
    table[[cps[m.start()] for m in pattern.finditer(chars)]] = True
    return table


def _count_matching(pattern: regex.Pattern, non_ascii: np.ndarray) -> int:
    """How many of the code points ``non_ascii`` the one-character ``pattern`` matches."""
    bmp = non_ascii < 0x10000
    n = int(np.count_nonzero(_bmp_table(pattern)[non_ascii[bmp]]))
    if not bmp.all():  # beyond the BMP (rare): the pattern itself
        n += len(pattern.findall("".join(map(chr, non_ascii[~bmp].tolist()))))
    return n


def cjk_codec_scores(sample: bytes, codec: str) -> tuple[int, int, int, int] | None:
    """``(characters beyond ASCII, replacement characters, plausible, signature)``
    of ``sample`` read with one of ``_CJK_CODECS``; None without any character beyond ASCII."""
    _, plausible, signature, _ = next(c for c in _CJK_CODECS if c[0] == codec)
    cps = np.frombuffer(sample.decode(codec, errors="replace").encode("utf-32-le"), dtype=np.uint32)
    non_ascii = cps[cps >= 0x80]
    if not non_ascii.size:
        return None
    bad = int(np.count_nonzero(non_ascii == 0xFFFD))
    return (int(non_ascii.size), bad, _count_matching(plausible, non_ascii),
            _count_matching(signature, non_ascii) if signature is not None else 0)


def _cjk_codec(sample: bytes) -> str | None:
    """The East Asian codec that reads ``sample`` as mostly CJK text: a codec
    whose language has a signature (kana, Hangul) wins when the text shows
    enough of it, else the first codec (GB18030, then Big5) that fits."""
    fallback = None
    high = np.bincount(np.frombuffer(sample, dtype=np.uint8), minlength=256)
    for codec, _, signature, least in _CJK_CODECS:
        if signature is None and fallback is not None:
            continue
        if codec in _KANA_LEADS:
            # Skip decoding when the kana cannot reach their share: each kana
            # has one of these lead bytes, and a character beyond ASCII has
            # at most three bytes, all of them >= 0x80.
            if high[list(_KANA_LEADS[codec])].sum() < least * high[0x80:].sum() / 3:
                continue
        scores = cjk_codec_scores(sample, codec)
        if scores is None:
            return None  # nothing beyond ASCII: no codec of these to tell
        n, bad, good, sig = scores
        # Real pages carry the odd broken sequence (a character cut in two):
        # tolerate up to 1% of replacement characters.
        if bad > 0.01 * n or good < 0.9 * n:
            continue
        if signature is None:
            fallback = codec
        elif sig >= least * n:
            return codec
    return fallback


def _detect(data: bytes) -> str | None:
    """Encoding of undeclared bytes: ISO-2022 by its escapes, UTF-8, else an
    East Asian codec that decodes them into mostly CJK text (``_cjk_codec``),
    else charset-normalizer's guess.

    Generic detectors often call GBK text a Cyrillic or Latin code page (any
    byte string is valid in those), so the East Asian codecs are checked first.
    Cost: O(sample); on a 13 KB undeclared GBK page ~0.4 ms (three decodes).
    """
    sample = data[:200_000]
    if sample.isascii():
        for escape, codec in _ISO_2022:
            if escape.search(sample):
                return codec
    try:
        sample.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4:  # a character cut by the sample boundary
            return "utf-8"
    cjk = _cjk_codec(sample)
    if cjk:
        return cjk
    from charset_normalizer import from_bytes  # imported lazily: rarely needed

    matches = from_bytes(sample)
    best = matches.best()
    if best is None:
        return "cp1252"
    enc = best.encoding
    # On a tie (short Western text: windows-1250, -1252 and -1257 read it
    # equally well), the web's default for undeclared pages, as browsers do.
    if any(m.encoding == "cp1252" and (m.chaos, m.coherence) == (best.chaos, best.coherence) for m in matches):
        enc = "cp1252"
    return "gb18030" if enc in ("gb2312", "gbk") else enc


def _plaintext_as_span(doc: LexborHTMLParser) -> None:
    """Replace each <plaintext> (obsolete, rare) by a <span> with its attributes
    and children. Its own text is serialised unescaped, yet it may hold elements
    too (the parser reconstructs <a>, <b>... inside it), so its serialisation is
    ambiguous; as a <span> (also inline) its text is escaped like any other."""
    for node in doc.css("plaintext"):
        span = doc.create_node("span")
        for name, value in node.attributes.items():
            span.attrs[name] = value if value is not None else ""
        for child in list(node.iter(include_text=True)):
            span.insert_child(child, move=True)
        node.replace_with(span, move=True)


def parse_document(data: bytes) -> LexborHTMLParser:
    """lexbor's tree of UTF-8 HTML bytes (invalid sequences read as U+FFFD)."""
    # scripting=True parses as a browser that runs scripts does: <noscript> is
    # one raw-text node (never shown), and the head elements after it stay in <head>.
    # WO_EVENTS skips the DOM mutation callbacks, ~5% faster. They implement
    # behaviours such as copying a <select>'s option into <selectedcontent>
    # (and <select> is never shown); a test checks the trees come out the same.
    # bound_nesting: tree construction is quadratic in the depth of nested
    # blocks; past MAX_DEPTH they are parsed as <marquee>, a scope boundary.
    return LexborHTMLParser(bound_nesting(data), scripting=True, options=LexborDocumentOptions.WO_EVENTS)


def document_title(doc: LexborHTMLParser) -> str:
    title_el = doc.css_first("title")
    return _WS.sub(" ", title_el.text()).strip() if title_el is not None else ""


def serialise_for_scan(doc: LexborHTMLParser) -> np.ndarray:
    """The body's serialisation (UTF-8, uint8) for ``html_scan.scan``; changes ``doc``."""
    # Never shown, and the only elements whose serialisation can be ambiguous: a
    # <script>'s text may hold "</script>" (after "<!--<script"), a <template>'s
    # content may hold a <plaintext>, and inside <svg>/<math> an element named
    # like a void or raw-text HTML one is neither. Dropping them first also
    # leaves less to serialise and scan, which pays for it (measured).
    doc.strip_tags(["script", "style", "template", "svg", "math"])
    _plaintext_as_span(doc)
    # <body>, or the whole document for a frameset page (its <head> is dropped by the scan)
    node = doc.body if doc.body is not None else doc.root
    html = (node.html or "") if node is not None else ""
    return np.frombuffer(html.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def scan_page(src: np.ndarray, title: str, encoding: str) -> Page:
    """The Page of a serialisation made by ``serialise_for_scan``."""
    out, n_out, rows = html_scan.scan(src, *_TAG_TABLE, *_ROLE_TABLE, html_scan.KEYWORDS)
    return Page(title, encoding=encoding, text=out[:n_out].tobytes().decode("utf-8", "replace"), rows=rows)


def _extract_utf8(data: bytes, encoding: str) -> Page:
    """Visible text of a UTF-8 encoded document: by ``raw_scan`` when it
    models the page's markup (the same Page, tested), else through lexbor."""
    if not data or data.isspace():  # (isspace does not copy the page, strip would)
        return Page(title="", blocks=[], encoding=encoding)
    page = _raw_page(data, encoding)
    return page if page is not None else lexbor_page(data, encoding)


def lexbor_page(data: bytes, encoding: str) -> Page:
    """Visible text of a non-blank UTF-8 document through lexbor's tree (the
    reference ``raw_scan`` is tested against)."""
    doc = parse_document(data)
    title = document_title(doc)
    return scan_page(serialise_for_scan(doc), title, encoding)


#: Pages by ``raw_scan``'s outcome in this process: 0 read by it, a bail code
#: (``raw_scan.BAIL_NAMES``) or -1 (NUL bytes, deep nesting) sent to lexbor.
RAW_SCAN_OUTCOMES: Counter[int] = Counter()


def _raw_page(data: bytes, encoding: str) -> Page | None:
    """The Page by ``raw_scan``, or None when the page needs lexbor: a
    construct it does not model, NUL bytes (the tokenizer drops them, which
    lexbor does before decoding), or nesting ``bound_nesting`` would bound."""
    if b"\x00" in data or bound_nesting(data) is not data:
        RAW_SCAN_OUTCOMES[-1] += 1
        return None
    bail, out, n_out, rows, title, n_title, nfkc = raw_scan.scan_html(
        np.frombuffer(data, dtype=np.uint8), _TAG_TABLE, _ROLE_TABLE)
    RAW_SCAN_OUTCOMES[bail] += 1
    if bail:
        return None
    title_text = _WS.sub(" ", title[:n_title].tobytes().decode("utf-8", "replace")).strip() if n_title > 0 else ""
    return Page(title_text, encoding=encoding, text=out[:n_out].tobytes().decode("utf-8", "replace"), rows=rows,
                nfkc_clean=nfkc <= 1)


def extract_text(text: str, encoding: str = "utf-8") -> Page:
    """Visible text of an already decoded HTML document."""
    return _extract_utf8(text.encode("utf-8", "surrogatepass"), encoding)


def extract(data: bytes, encoding: str | None = None) -> Page:
    """Visible text of HTML bytes; never raises on malformed markup.

    ``encoding`` is an encoding declared outside the document (HTTP header).
    """
    enc, skip = sniff_encoding(data, encoding)
    if codecs.lookup(enc).name == "utf-8" and b"\x00" not in data:
        # UTF-8 goes to the parser as it is: lexbor replaces invalid sequences
        # exactly as Python's "replace" does (tested), without a decode/encode
        # round trip. Not with NUL bytes: lexbor drops them before decoding,
        # which joins the bytes around them into other characters.
        return _extract_utf8(data[skip:] if skip else data, enc)
    if enc == "gb18030":  # (GB2312 and GBK pages too: w3lib reads them as their superset)
        utf8 = gb_to_utf8(data[skip:] if skip else data)
        if utf8 is not None:
            return _extract_utf8(utf8, enc)
    return extract_text(to_unicode(data[skip:], enc), enc)
