"""The documents a user looks things up in.

The README and ``docs/*.md`` together name every ``NEARDUP_*`` setting and every ``neardup/`` stat the
code uses; the README names every public name of ``scrapy_neardup`` and links every document in
``docs/``; every relative link in them, BENCHMARKS.md and CHANGELOG.md leads to a file that exists,
and to a heading of it when the link names one.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _code() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "crawler").rglob("*.py"))


def _documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _linked_documents() -> list[Path]:
    return [*_documents(), ROOT / "BENCHMARKS.md", ROOT / "CHANGELOG.md"]


def _reference() -> str:
    """What a user can read: the README and every document in docs/."""
    return "\n".join(p.read_text() for p in _documents())


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a ``# comment`` in a code block is no heading, and
    ``[x](y)`` in code is no link)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_prose(path.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")  # GitHub numbers repeated headings
    return anchors


def _relative_links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_every_setting_is_documented():
    reference = _reference()
    settings = set(re.findall(r'"(NEARDUP_[A-Z_]+)"', _code()))
    assert settings
    assert not {s for s in settings if f"`{s}`" not in reference}, "settings neither README nor docs/ names"


def test_every_stat_is_documented():
    reference = _reference()
    stats = set(re.findall(r'(?:inc_value|set_value|max_value)\(f?"(neardup/[^"{]*)', _code()))
    assert len(stats) > 20

    def documented(stat: str) -> bool:  # by name, or as a family: neardup/skipped/<reason> naming `reason`
        family, _, last = stat.rstrip("/").rpartition("/")
        return stat in reference or (f"`{family}/<" in reference and f"`{last}`" in reference) \
            or f"{family}/<" in reference and not last

    assert not {s for s in stats if not documented(s)}, "stats neither README nor docs/ names"


def test_the_readme_lists_every_public_name():
    import scrapy_neardup  # the facade loads its names lazily: this imports neither scrapy nor twisted

    readme = README.read_text()
    assert not [n for n in scrapy_neardup.__all__ if not re.search(rf"\b{re.escape(n)}\b", readme)]


def test_every_document_in_docs_is_linked_from_the_readme():
    docs = sorted(DOCS.glob("*.md"))
    assert docs
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _relative_links(README)}
    assert not [p.name for p in docs if p.resolve() not in linked], "docs/ files the README does not link"


def test_every_relative_link_resolves():
    broken = []
    for doc in _linked_documents():
        for target in _relative_links(doc):
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_anchor_of_a_heading_is_githubs():
    assert _slug("Crash safety: kill -9 at any moment") == "crash-safety-kill--9-at-any-moment"
    assert _slug("The library's commands") == "the-librarys-commands"
    assert _slug("Every pair within 3 bits, by J band") == "every-pair-within-3-bits-by-j-band"
