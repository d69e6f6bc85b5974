"""Visible text from HTML bytes.

``extract(html_bytes)`` decodes the page (declared encoding, else BOM, else
``<meta charset>``, else detection), parses it with lxml's forgiving HTML
parser and walks the tree once, keeping only what a reader would see:

* dropped whole: ``script style noscript template svg head`` (the ``<title>``
  is kept apart), comments, processing instructions, and hidden elements
  (``hidden`` attribute, ``aria-hidden="true"``, inline ``display:none`` or
  ``visibility:hidden``);
* block-level elements start new lines; whitespace is normalised.

Besides the text, the walk records *blocks* (one per block-level run of
text) with their link density and whether they sit in page furniture
(``nav header footer aside`` or the matching ARIA roles). The fingerprint
features use this to damp navigation and templates; the visible text itself
keeps everything a reader sees.

Cost: one parse and one walk, O(size of the page).

>>> page = extract(b"<html><title>T</title><body><p>Hello <b>world</b></p>"
...                b"<script>x()</script><div hidden>secret</div></body></html>")
>>> page.title, page.text
('T', 'Hello world')
"""

from __future__ import annotations

import codecs
import logging
import re
import sys
from dataclasses import dataclass, field

import lxml.etree
import regex
from w3lib.encoding import html_to_unicode

logger = logging.getLogger(__name__)

#: Elements whose whole subtree is never visible text.
DROPPED_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "head", "math", "iframe",
     "object", "embed", "canvas", "select", "datalist", "button"}
)
#: Elements that start a new line (a new block) when rendered.
BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "br", "caption", "center", "dd",
     "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer",
     "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "li",
     "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
     "td", "tfoot", "th", "thead", "tr", "ul", "option", "legend", "label"}
)
#: Page furniture: navigation, banners, footers, sidebars.
FURNITURE_TAGS = frozenset({"nav", "header", "footer", "aside", "menu"})
FURNITURE_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu", "menubar"})

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_WS = re.compile(r"\s+")
_PARSER = lxml.etree.HTMLParser(
    # huge_tree: libxml2 otherwise stops at nesting depth 256 and the rest of the page is lost
    encoding="utf-8", remove_comments=True, remove_pis=True, recover=True, no_network=True, huge_tree=True,
    default_doctype=False,
)


@dataclass(slots=True)
class Block:
    """One block-level run of visible text."""

    text: str
    link_chars: int = 0  # characters of ``text`` that sit inside <a href>
    furniture: bool = False  # inside nav/header/footer/aside or an ARIA landmark for them

    @property
    def link_density(self) -> float:
        return self.link_chars / len(self.text) if self.text else 0.0


@dataclass(slots=True)
class Page:
    """What ``extract`` returns: the title, the visible text and its blocks."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    encoding: str = "utf-8"

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks)


class ExtractionError(ValueError):
    """The bytes could not be turned into a document at all."""


def decode_html(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode HTML bytes; returns ``(text, encoding_used)``.

    Order: the caller's declared encoding (e.g. from a Content-Type header),
    then a BOM, then ``<meta charset>`` / ``http-equiv``, then detection.
    w3lib maps legacy labels to their supersets as browsers do
    (gb2312 -> gb18030, iso-8859-1 -> cp1252), which is what makes gb2312
    pages with GBK-only characters decode right.
    """
    content_type = f"text/html; charset={encoding}" if encoding else None
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            logger.debug("unknown declared encoding %r, ignoring it", encoding)
            content_type = None
    enc, text = html_to_unicode(content_type, data, auto_detect_fun=_detect)
    return text, enc


_NON_ASCII = regex.compile(r"[^\x00-\x7f]")
#: punctuation and symbols (other than U+FFFD) are plausible in any script
_PUNCT = r"\p{P}\p{Sm}\p{So}\p{Sk}\p{Sc}--\ufffd"
#: Multi-byte East Asian codecs tried before generic detection, with the
#: characters a real page in each is mostly made of (beyond ASCII).
_CJK_CODECS = (
    ("gb18030", regex.compile(r"[\p{Han}\u3000-\u303f\uff00-\uffef" + _PUNCT + "]", regex.V1)),
    ("big5", regex.compile(r"[\p{Han}\u3000-\u303f\uff00-\uffef" + _PUNCT + "]", regex.V1)),
    ("shift_jis", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\u3000-\u303f\uff00-\uffef" + _PUNCT + "]", regex.V1)),
    ("euc-kr", regex.compile(r"[\p{Hangul}\p{Han}\u3000-\u303f\uff00-\uffef" + _PUNCT + "]", regex.V1)),
)



def _detect(data: bytes) -> str | None:
    """Encoding of undeclared bytes: UTF-8, else a CJK codec that decodes them
    strictly into mostly CJK text, else charset-normalizer's guess.

    Generic detectors often call GBK text a Cyrillic or Latin code page (any
    byte string is valid in those), so the East Asian codecs are checked first.
    """
    sample = data[:200_000]
    try:
        sample.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4:  # a character cut by the sample boundary
            return "utf-8"
    for codec, plausible in _CJK_CODECS:
        # Real pages carry the odd broken sequence (a character cut in two):
        # tolerate up to 1% of replacement characters.
        text = sample.decode(codec, errors="replace")
        non_ascii = "".join(_NON_ASCII.findall(text))
        if not non_ascii:
            continue
        bad = non_ascii.count("\ufffd")
        good = len(plausible.findall(non_ascii))
        if bad <= 0.01 * len(non_ascii) and good >= 0.9 * len(non_ascii):
            return codec
    from charset_normalizer import from_bytes  # imported lazily: rarely needed

    best = from_bytes(sample).best()
    if best is None:
        return "cp1252"
    enc = best.encoding
    return "gb18030" if enc in ("gb2312", "gbk") else enc


def parse(text: str) -> lxml.etree._Element | None:
    """Parse decoded HTML with lxml's recovering parser; None for an empty document."""
    # lxml refuses str input with an XML encoding declaration; feed UTF-8 bytes instead.
    data = text.encode("utf-8", "surrogatepass")
    if not data.strip():
        return None
    try:
        root = lxml.etree.fromstring(data, parser=_PARSER)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None
    return root


def _blocks(root: lxml.etree._Element) -> list[Block]:
    """Blocks of visible text in document order, one recursive walk.

    A closure with locally bound names rather than a class: this walk runs on
    every element of every page, and attribute lookups were a measurable
    share of fingerprinting time. Recursion depth is bounded by lxml's parser.
    """
    blocks: list[Block] = []
    parts: list[str] = []
    append = parts.append
    link_chars = 0
    block_tags, furniture_tags, furniture_roles = BLOCK_TAGS, FURNITURE_TAGS, FURNITURE_ROLES
    hidden_style = _HIDDEN_STYLE.search
    ws_sub = _WS.sub

    def flush(furniture: bool) -> None:
        nonlocal link_chars
        raw = "".join(parts)
        parts.clear()
        text = ws_sub(" ", raw).strip()
        if text:
            # link chars counted before whitespace folding: scale them down with it
            blocks.append(Block(text, min(len(text), int(link_chars * len(text) / len(raw))), furniture))
        link_chars = 0

    def walk(el: lxml.etree._Element, furniture: bool, in_link: bool) -> None:
        nonlocal link_chars
        get = el.get
        # hidden elements: the attribute, aria-hidden="true", inline display:none / visibility:hidden
        if get("hidden") is not None:
            return
        aria = get("aria-hidden")
        if aria is not None and aria.strip().lower() == "true":
            return
        style = get("style")
        if style and hidden_style(style):
            return
        tag = el.tag
        is_block = tag in block_tags
        if not furniture and (tag in furniture_tags or (get("role") or "").lower() in furniture_roles):
            if parts:
                flush(False)
            furniture = True
            is_block = True
        elif is_block and parts:
            flush(furniture)
        link = in_link or (tag == "a" and get("href") is not None)
        text = el.text
        if text:
            append(text)
            if link:
                link_chars += len(text)
        for child in el:
            if isinstance(child.tag, str):  # skip entities
                walk(child, furniture, link)
            tail = child.tail
            if tail:  # the tail belongs to this element, not to the child
                if parts and child.tag in block_tags:
                    flush(furniture)
                append(tail)
                if link:
                    link_chars += len(tail)
        if is_block and parts:
            flush(furniture)

    try:
        walk(root, False, False)
    except RecursionError:
        # absurdly deep nesting (thousands of levels): keep the text, lose the block structure
        text = ws_sub(" ", "".join(root.itertext())).strip()
        return [Block(text)] if text else []
    if parts:
        flush(False)
    return blocks


def _remove_invisible(root: lxml.etree._Element) -> None:
    """Drop never-visible subtrees in C (their tails stay); hidden elements are
    skipped during the walk, which visits every element anyway."""
    lxml.etree.strip_elements(root, *DROPPED_TAGS, lxml.etree.Comment, lxml.etree.ProcessingInstruction,
                              with_tail=False)


def extract_text(text: str, encoding: str = "utf-8") -> Page:
    """Visible text of an already decoded HTML document."""
    root = parse(text)
    if root is None:
        return Page(title="", blocks=[], encoding=encoding)
    title = ""
    head = root.find("head")
    title_el = head.find("title") if head is not None else None
    if title_el is None:
        title_el = root.find(".//title")
    if title_el is not None:
        title = _WS.sub(" ", "".join(title_el.itertext())).strip()
    _remove_invisible(root)
    body = root.find("body")
    return Page(title=title, blocks=_blocks(body if body is not None else root), encoding=encoding)


def extract(data: bytes, encoding: str | None = None) -> Page:
    """Visible text of HTML bytes; never raises on malformed markup.

    ``encoding`` is an encoding declared outside the document (HTTP header).
    """
    text, enc = decode_html(data, encoding)
    return extract_text(text, enc)
