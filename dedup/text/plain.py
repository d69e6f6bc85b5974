"""Plain text -> ``Page``: what a corpus record's text field becomes before its features.

>>> p = text_page("First paragraph here.\\n\\n  Second   one\\n", title="T")
>>> p.title, p.text, len(p.rows)
('T', 'First paragraph here.\\nSecond one', 2)

Each non-blank line is one block (the HTML path makes one block per block
element and joins them with newlines, so a page's visible text read back here
gives the same blocks); white space inside a line is collapsed as the HTML
path collapses it. Plain text carries no markup, so nothing says which lines
are menus and links: a line of fewer than ``MENU_WORDS`` words (and fewer
than ``MENU_HAN`` Han characters) is taken for one, as furniture, since in a
page's visible text such lines are nearly all menu items, links and bylines
(on aeb this brings a page's visible text from a median of 3 bits from its
HTML to 2; docs/corpus.md). O(len(text)).
"""

from __future__ import annotations

import numpy as np

from .page import HAN, N_COLUMNS, Page

#: a line with fewer words than this (and fewer Han characters than ``MENU_HAN``) reads as a menu item
MENU_WORDS = 4
MENU_HAN = 8


def text_page(text: str, title: str | None = None) -> Page:
    """The ``Page`` of plain ``text`` (blocks: its non-blank lines) titled ``title``.

    The rows are made here in one array, as ``Page`` would make them from ``Block`` objects (the same
    rows, the same text), without a ``Block`` and a row assignment a line: this was a sixth of a
    corpus record's fingerprint (0.07 of 0.42 ms), and is now ~0.03 ms. A line of ASCII has no Han
    characters, so it is not searched for them."""
    lines: list[str] = []
    rows: list[tuple[int, int, int, int, int, int, int]] = []
    pos = 0
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        joined = " ".join(words)
        n_han = 0 if joined.isascii() else len(HAN.findall(joined))
        menu = len(words) < MENU_WORDS and (len(line) < MENU_HAN or n_han < MENU_HAN)
        end = pos + len(joined)
        rows.append((pos, end, menu, 0, len(words), n_han, 0))
        lines.append(joined)
        pos = end + 1
    return Page(" ".join(title.split()) if title else "", text="\n".join(lines),
                rows=np.array(rows, dtype=np.int64).reshape(len(rows), N_COLUMNS))
