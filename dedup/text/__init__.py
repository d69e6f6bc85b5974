"""Stage 1: HTML bytes -> the visible text a reader sees (``extract``).

``decode`` finds the encoding, ``binary_sniff`` turns away files that are
not pages, ``hostile_scan`` turns away pages no parser should be given
(200,000 attributes on one element, millions of elements), ``deep_nesting``
bounds the parser's work, ``tags`` says what
each element is to a reader, ``visible`` parses with lexbor and reads the
tree (compiled ``html_scan`` or the Python walk in ``visible_reference``),
``page`` holds the result.
"""

from .decode import decode_html, sniff_encoding
from .page import HAN, Block, Page
from .tags import BLOCK_TAGS, DROPPED_TAGS, FURNITURE_ROLES, FURNITURE_TAGS
from .visible import extract, extract_text, parse_document

__all__ = ["BLOCK_TAGS", "DROPPED_TAGS", "FURNITURE_ROLES", "FURNITURE_TAGS", "HAN", "Block", "Page", "decode_html",
           "extract", "extract_text", "parse_document", "sniff_encoding"]
