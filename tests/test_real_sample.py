"""The committed sample of real pages (``tests/fixtures/real``): runs in a fresh
clone, without ``../shared``.

Both fingerprinting paths (compiled, and the reference a crawl runs while its
kernels compile) give each page its golden fingerprint, and the same visible
text and blocks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_neardup.dedup import Fingerprinter, read_document
from scrapy_neardup.dedup.text import extract

SAMPLE = Path(__file__).resolve().parent / "fixtures" / "real"
GOLDEN = json.loads((SAMPLE / "golden.json").read_text())


def test_the_sample_covers_each_set():
    assert {name.split("/")[0] for name in GOLDEN} == {"aeb", "zh-cwced", "sqlite3-doc"}
    assert len(GOLDEN) >= 40


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_both_paths_give_the_golden_fingerprint(name):
    data = read_document(SAMPLE / name)
    fper = Fingerprinter()
    for compiled in (True, False):
        r = fper.fingerprint_html(data, compiled=compiled)
        assert (r.hex or f"-{r.reason}") == GOLDEN[name], f"compiled={compiled}"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_both_paths_read_the_same_visible_text(name):
    data = read_document(SAMPLE / name)
    fast, ref = extract(data, compiled=True), extract(data, compiled=False)
    assert (fast.title, fast.text, fast.rows.tolist()) == (ref.title, ref.text, ref.rows.tolist())
