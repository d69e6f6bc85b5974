"""The README documents every ``NEARDUP_*`` setting and every ``neardup/`` stat the code uses."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def _code() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "crawler").rglob("*.py"))


def test_every_setting_is_documented():
    readme = (ROOT / "README.md").read_text()
    settings = set(re.findall(r'"(NEARDUP_[A-Z_]+)"', _code()))
    assert settings and not {s for s in settings if f"`{s}`" not in readme}


def test_every_stat_is_documented():
    readme = (ROOT / "README.md").read_text()
    stats = set(re.findall(r'(?:inc_value|set_value|max_value)\(f?"(neardup/[^"{]*)', _code()))
    assert len(stats) > 20

    def documented(stat: str) -> bool:  # by name, or as a family: neardup/skipped/<reason> naming `reason`
        family, _, last = stat.rstrip("/").rpartition("/")
        return stat in readme or (f"`{family}/<" in readme and f"`{last}`" in readme) or f"{family}/<" in readme \
            and not last

    assert not {s for s in stats if not documented(s)}, "stats the README does not name"
