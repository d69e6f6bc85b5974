"""The visible text of a parsed page by a plain-Python walk of lexbor's tree.

The same rules as ``html_scan`` (see ``visible``), node by node: about 5x
slower than the compiled scan of the serialisation, and it needs no
compilation. It is that scan's oracle (tests compare the two on real and
generated pages) and the path a process takes while its compiled code is
not ready (``dedup.jit``).

>>> from scrapy_neardup.dedup.text.visible import parse_document
>>> reference_page(parse_document(b"<nav><a href=/>Home</a></nav><p>Hello <b>world</b></p>"), "", "utf-8").blocks
[Block(text='Home', link_chars=4, furniture=True, n_words=1, n_han=0, code_chars=0), Block(text='Hello world', link_chars=0, furniture=False, n_words=2, n_han=0, code_chars=0)]
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .page import HAN, Block, Page
from .tags import BLOCK_TAGS, CODE_TAGS, DROPPED_TAGS, FURNITURE_ROLES, FURNITURE_TAGS

_WS = re.compile(r"\s+")
_HIDDEN_STYLE = re.compile(r"display[ \t\n\r\f\v]*:[ \t\n\r\f\v]*none|visibility[ \t\n\r\f\v]*:[ \t\n\r\f\v]*hidden",
                           re.I)


def _hidden(node: LexborNode) -> bool:
    attrs = node.attributes
    if "hidden" in attrs:
        return True
    if (attrs.get("aria-hidden") or "").strip(" \t\n\r\f\v").lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(attrs.get("style") or ""))


def reference_page(doc: LexborHTMLParser, title: str, encoding: str) -> Page:
    """The Page of ``doc`` (made by ``visible.parse_document``) with ``title``."""
    root = doc.body if doc.body is not None else doc.root
    blocks: list[Block] = []
    parts: list[str] = []
    link_chars = code_chars = 0

    def flush(furniture: bool) -> None:
        nonlocal link_chars, code_chars
        raw = "".join(parts)
        parts.clear()
        folded = _WS.sub(" ", raw).strip()
        if folded:
            # link and code characters counted before white space folding: scaled down with it
            blocks.append(Block(folded, min(len(folded), link_chars * len(folded) // len(raw)), furniture,
                                len(folded.split()), len(HAN.findall(folded)),
                                min(len(folded), code_chars * len(folded) // len(raw))))
        link_chars = code_chars = 0

    def enter(el: LexborNode, furniture: bool, in_link: bool, in_code: bool) -> list | None:
        """Open an element: the frame to walk its children in, or None if it is dropped."""
        tag = el.tag
        if tag in DROPPED_TAGS or _hidden(el):
            return None
        is_block = tag in BLOCK_TAGS
        role = (el.attributes.get("role") or "").lower()
        if not furniture and (tag in FURNITURE_TAGS or role in FURNITURE_ROLES):
            flush(False)
            furniture = True
            is_block = True
        elif is_block:
            flush(furniture)
        link = in_link or (tag == "a" and "href" in el.attributes)
        return [el.iter(include_text=True), furniture, link, in_code or tag in CODE_TAGS, is_block]

    # An explicit stack, not recursion: pages nest up to deep_nesting's bound
    # (2,048), deeper than Python's recursion limit.
    stack = [f] if root is not None and (f := enter(root, False, False, False)) is not None else []
    while stack:
        children, furniture, link, code, is_block = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if is_block:
                flush(furniture)
        elif child.is_text_node:
            t = child.text_content or ""
            parts.append(t)
            if link:
                link_chars += len(t)
            if code:
                code_chars += len(t)
        elif child.is_element_node and (f := enter(child, furniture, link, code)) is not None:
            stack.append(f)
    flush(False)
    return Page(title=title, blocks=blocks, encoding=encoding)
