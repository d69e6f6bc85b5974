"""What each HTML element is to a reader: never seen, a new line, page
furniture, a listing. One vocabulary for both readings of the tree, the
compiled scan (``visible``, ``html_scan``) and the Python walk
(``visible_reference``), so that they cannot disagree on it.

>>> "script" in DROPPED_TAGS, "p" in BLOCK_TAGS, "nav" in FURNITURE_TAGS
(True, True, True)
"""

from __future__ import annotations

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
#: Listings: code, commands and their output. Their characters are counted per
#: block, so that the features can tell a listing from prose (they are text a
#: reader sees, and stay in the visible text).
CODE_TAGS = frozenset({"pre", "code", "kbd", "samp", "xmp", "listing"})
