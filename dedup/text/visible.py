"""Visible text from HTML bytes: ``extract(data) -> Page``.

The page is decoded (``decode``: BOM, declared encoding, ``<meta charset>``,
detection) and parsed by lexbor (selectolax), which builds the tree a
browser builds by the HTML Standard's tree construction. What a reader sees
of that tree is then read one of two ways, with the same result (tested on
every real page and on generated markup):

* compiled: the tree's serialisation is read in one numba pass
  (``html_scan``), about 5x faster than walking it;
* reference: a walk of the tree node by node in Python
  (``visible_reference``), which needs no compilation. It is the oracle of
  the compiled scan and the path of a process whose compiled code is not
  ready yet (``dedup.jit``).

Both keep only what a reader would see:

* dropped whole: ``DROPPED_TAGS`` (``script style noscript template head``
  and the like; the ``<title>`` is kept apart), comments, processing
  instructions, and hidden elements (``hidden`` attribute, ``aria-hidden="true"``,
  inline ``display:none`` or ``visibility:hidden``), which count as absent, as
  ``display: none`` renders;
* an ``<svg>`` shows only the words of its ``<text>`` elements, a ``<math>``
  only its tokens (``foreign_as_text``);
* block-level elements start new lines; whitespace is normalised.

Besides the text, they record *blocks* (one per block-level run of text)
with their link density, words, Han characters, listing characters (inside
``pre code kbd samp xmp listing``) and whether they sit in page furniture
(``nav header footer aside`` or the matching ARIA roles). The fingerprint
features use this to damp navigation, templates and listings, and to read
the language of the prose; the visible text itself keeps everything a
reader sees.

Cost: O(size of the page): one parse, then one serialisation and one
compiled scan, or one walk.

>>> page = extract(b"<html><title>T</title><body><p>Hello <b>world</b></p>"
...                b"<script>x()</script><div hidden>secret</div></body></html>")
>>> page.title, page.text
('T', 'Hello world')
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

import numpy as np
from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser, LexborNode
from w3lib.encoding import to_unicode

from .. import jit
from . import html_scan
from .deep_nesting import bound_nesting
from .decode import detect_encoding, meta_encoding, sniff_encoding
from .page import Page
from .tags import BLOCK_TAGS, CODE_TAGS, DROPPED_TAGS, FURNITURE_ROLES, FURNITURE_TAGS

_WS = re.compile(r"\s+")
_TAG_TABLE = html_scan.tag_table(BLOCK_TAGS, FURNITURE_TAGS, DROPPED_TAGS, CODE_TAGS)
_ROLE_TABLE = html_scan.role_table(FURNITURE_ROLES)


#: Foreign elements (HTML's name for SVG and MathML) and the descendants whose
#: text a reader sees of them: an SVG's <text> (with its <tspan>s and
#: <textPath>s), a formula's tokens.
_FOREIGN_TEXT = {"svg": "text", "math": "mi, mn, mo, mtext, ms"}


def foreign_as_text(doc: LexborHTMLParser) -> None:
    """Replace each outermost <svg> and <math> by a <span> with its attributes
    that holds the words a reader sees of it (``_FOREIGN_TEXT``), one space
    between two: a syntax diagram's keywords, a chart's labels, a formula's
    symbols. The rest (shapes, an SVG's <style>, <title> and <desc>, a
    formula's TeX annotation) is not drawn. A <span>, inline as they are,
    keeps its place in the block and its hidden attributes (icons are often
    ``aria-hidden``). Done before either reading of the tree, so that both
    see the same. O(elements of the foreign subtrees)."""
    for node in doc.css("svg, math"):
        if _below(node.parent, _FOREIGN_TEXT):
            continue  # inside another drawing: its words go with that one's
        span = _span_like(doc, node)
        # (not an <annotation-xml>'s: another form of a formula, not drawn)
        words = " ".join(t.text(deep=True) for t in node.css(_FOREIGN_TEXT[str(node.tag)])
                         if not _below(t, ("annotation-xml",), node))
        if words:
            span.insert_child(words)
        node.replace_with(span, move=True)


def _below(node: LexborNode | None, tags, root: LexborNode | None = None) -> bool:
    """True when ``node`` or one of its ancestors up to (not including) ``root`` is one of ``tags``."""
    while node is not None and node is not root:
        if node.tag in tags:
            return True
        node = node.parent
    return False


def _span_like(doc: LexborHTMLParser, node: LexborNode) -> LexborNode:
    """A new <span> with ``node``'s attributes, to put in its place."""
    span = doc.create_node("span")
    for name, value in node.attributes.items():
        span.attrs[name] = value if value is not None else ""
    return span


def _plaintext_as_span(doc: LexborHTMLParser) -> None:
    """Replace each <plaintext> (obsolete, rare) by a <span> with its attributes
    and children. Its own text is serialised unescaped, yet it may hold elements
    too (the parser reconstructs <a>, <b>... inside it), so its serialisation is
    ambiguous; as a <span> (also inline) its text is escaped like any other."""
    for node in doc.css("plaintext"):
        span = _span_like(doc, node)
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


def page_of_document(doc: LexborHTMLParser, encoding: str, compiled: bool | None = None) -> Page:
    """The Page of a parsed document (changes ``doc``); ``compiled``: read by
    ``html_scan`` (True) or by the reference walk (False); None: whichever
    ``jit`` says this process may run now."""
    if compiled is None:
        compiled = jit.ready("fingerprint")
    foreign_as_text(doc)  # (first: an <svg>'s <title> is not the page's)
    title = document_title(doc)
    if not compiled:
        from .visible_reference import reference_page

        return reference_page(doc, title, encoding)
    return scan_page(serialise_for_scan(doc), title, encoding)


#: Called with the parsed tree, before the text is read from it (which changes it), and the encoding decoded from
OnDocument = Callable[[LexborHTMLParser, str], None]


def _extract_utf8(data: bytes, encoding: str, compiled: bool | None, on_document: OnDocument | None = None) -> Page:
    """Visible text of a UTF-8 encoded document."""
    if not data or data.isspace():  # (isspace does not copy the page, strip would)
        return Page(title="", blocks=[], encoding=encoding)
    doc = parse_document(data)
    if on_document is not None:
        on_document(doc, encoding)
    return page_of_document(doc, encoding, compiled)


def extract_text(text: str, encoding: str = "utf-8", compiled: bool | None = None,
                 on_document: OnDocument | None = None) -> Page:
    """Visible text of an already decoded HTML document."""
    return _extract_utf8(text.encode("utf-8", "surrogatepass"), encoding, compiled, on_document)


def extract(data: bytes, encoding: str | None = None, compiled: bool | None = None,
            on_document: OnDocument | None = None) -> Page:
    """Visible text of HTML bytes; never raises on malformed markup.

    ``encoding`` is an encoding declared outside the document (HTTP header);
    ``compiled`` as in ``page_of_document``; ``on_document`` is given the
    parsed tree first (the worker reads the page's links there:
    ``fingerprint.links``), and the encoding the bytes were decoded from.
    """
    enc, skip = sniff_encoding(data, encoding)
    page = _extract_as(data, enc, skip, compiled, on_document)
    if skip or not _mostly_invalid(page.text):
        return page
    # Declared in an encoding it is not in (a server's "charset=utf-8" over a windows-1251 page): its
    # letters were all U+FFFD, which make no token, so distinct pages of one template were fingerprinted
    # by the template alone, and dropped as near-duplicates of each other. Read as its <meta> says, or
    # else as detected, when that reads more of it.
    for found in (meta_encoding(data), detect_encoding(data)):
        if found is None or codecs.lookup(found).name == codecs.lookup(enc).name:
            continue
        again = _extract_as(data, found, 0, compiled, on_document)
        if again.text.count("\ufffd") * 2 < page.text.count("\ufffd"):
            return again
    return page


def _extract_as(data: bytes, enc: str, skip: int, compiled: bool | None, on_document: OnDocument | None) -> Page:
    """``extract`` of ``data`` in encoding ``enc`` (after a BOM of ``skip`` bytes)."""
    if codecs.lookup(enc).name == "utf-8" and b"\x00" not in data:
        # UTF-8 goes to the parser as it is: lexbor replaces invalid sequences
        # exactly as Python's "replace" does (tested), without a decode/encode
        # round trip. Not with NUL bytes: lexbor drops them before decoding,
        # which joins the bytes around them into other characters.
        return _extract_utf8(data[skip:] if skip else data, enc, compiled, on_document)
    return extract_text(to_unicode(data[skip:], enc), enc, compiled, on_document)


#: U+FFFD in a page's text past which its encoding is taken for wrong (``_mostly_invalid``)
MIN_INVALID = 16


def _mostly_invalid(text: str) -> bool:
    """Whether at least ``MIN_INVALID`` of the text's characters, and three quarters of those beyond ASCII,
    are U+FFFD: bytes the page's encoding could not read (windows-1251, -1253, -1252, Shift_JIS or GB18030
    text read as UTF-8 is 92-100% U+FFFD; a UTF-8 page with stray bytes among its own letters is not
    re-read, which would make mojibake of them). O(len(text)), in C."""
    bad = text.count("\ufffd")
    return bad >= MIN_INVALID and bad * 4 >= 3 * (len(text) - len(text.encode("ascii", "ignore")))
