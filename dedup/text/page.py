"""What the text stage returns: a ``Page`` (title, visible text, blocks).

>>> p = Page("T", [Block("Hello world", furniture=False), Block("Home", link_chars=4, furniture=True)])
>>> p.text, p.rows[:, ROW_FURNITURE].tolist(), p.blocks[1].link_density
('Hello world\\nHome', [0, 1], 1.0)
>>> Page("", [Block("ls -l /etc", code_chars=10)]).blocks[0].code_density
1.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: Columns of ``Page.rows``.
ROW_START, ROW_END, ROW_FURNITURE, ROW_LINK, ROW_WORDS, ROW_HAN, ROW_CODE = range(7)
N_COLUMNS = ROW_CODE + 1

#: Han characters. stdlib re with explicit ranges: much faster than regex's \\p{Han} for counting.
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


@dataclass(slots=True)
class Block:
    """One block-level run of visible text."""

    text: str
    link_chars: int = 0  # characters of ``text`` that sit inside <a href>
    furniture: bool = False  # inside nav/header/footer/aside or an ARIA landmark for them
    #: words (white-space separated) and Han characters of ``text``; -1: count them from the text
    n_words: int = -1
    n_han: int = -1
    #: characters of ``text`` inside a listing: <pre>, <code>, <kbd>, <samp> (commands, code, output)
    code_chars: int = 0

    @property
    def link_density(self) -> float:
        return self.link_chars / len(self.text) if self.text else 0.0

    @property
    def code_density(self) -> float:
        return self.code_chars / len(self.text) if self.text else 0.0


class Page:
    """What ``extract`` returns: the title, the visible text (blocks separated
    by newlines) and one row per block in ``rows``, an (m, 7) int64 array:
    start and end of the block in ``text``, furniture (0/1), link characters,
    words, Han characters, listing (code) characters. ``blocks`` gives the same as ``Block`` objects.

    The features read ``rows`` as arrays; a Page made from ``Block`` objects
    gets its rows from them.
    """

    __slots__ = ("title", "text", "rows", "encoding", "_blocks", "plan")

    def __init__(self, title: str = "", blocks: list[Block] | None = None, encoding: str = "utf-8", *,
                 text: str = "", rows: np.ndarray | None = None) -> None:
        self.title = title
        self.encoding = encoding
        self._blocks = list(blocks) if blocks is not None else None
        if self._blocks is not None:
            text, rows = _text_and_rows(self._blocks)
        self.text = text
        self.rows = rows if rows is not None else np.zeros((0, N_COLUMNS), dtype=np.int64)
        #: (parameters, block plan) of the features' last ``block_plan``, so that it is made once
        self.plan: tuple | None = None

    @property
    def blocks(self) -> list[Block]:
        if self._blocks is None:
            text = self.text
            self._blocks = [Block(text[start:end], link, bool(furniture), words, han, code)
                            for start, end, furniture, link, words, han, code in self.rows.tolist()]
        return self._blocks

    def __repr__(self) -> str:
        return f"Page(title={self.title!r}, blocks={len(self.rows)}, chars={len(self.text)})"


def _text_and_rows(blocks: list[Block]) -> tuple[str, np.ndarray]:
    rows = np.zeros((len(blocks), N_COLUMNS), dtype=np.int64)
    pos = 0
    for i, b in enumerate(blocks):
        words = b.n_words if b.n_words >= 0 else len(b.text.split())
        han = b.n_han if b.n_han >= 0 else len(HAN.findall(b.text))
        rows[i] = (pos, pos + len(b.text), b.furniture, b.link_chars, words, han, b.code_chars)
        pos += len(b.text) + 1
    return "\n".join(b.text for b in blocks), rows


