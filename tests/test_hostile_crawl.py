"""A real crawl of the generated hostile corpus: every page is fingerprinted or
skipped with a counted reason, nothing raises, the crawl finishes (issue 14).
The time and memory each page costs are measured in bench/hostile.py."""

from __future__ import annotations

from collections import Counter

from tests.fixtures.hostile import hostile_pages
from tests.fixtures.http import PageServer
from tests.test_crawl import scrapy_crawl, stat


def test_hostile_pages_are_fingerprinted_or_skipped_with_a_reason(tmp_path):
    pages = hostile_pages()
    links = "".join(f'<a href="{p}">{p}</a> ' for p in pages)
    index = (f"<html><body><p>An index of hostile pages for the near-duplicate filter, with enough words to "
             f"be fingerprinted itself.</p>{links}</body></html>").encode()

    def page(path: str) -> tuple[int, dict[str, str], bytes]:
        ctype, body, _ = pages.get(path, ("text/html", index, ""))
        return 200, {"Content-Type": ctype}, body

    with PageServer(page) as server:
        r = scrapy_crawl(f"{server.url}/index.html", tmp_path, "DOWNLOAD_WARNSIZE=0", "LOG_LEVEL=INFO")
    log = r.stderr
    assert r.returncode == 0 and "'finish_reason': 'finished'" in log, log[-3000:]
    want = Counter(exp for _, _, exp in pages.values())
    for reason, n in want.items():
        if reason == "fingerprinted":
            continue
        assert (stat(log, f"neardup/skipped/{reason}") or 0) == n, (reason, log[-4000:])
    assert stat(log, "neardup/skipped/unparsable") is None
    checked = stat(log, "neardup/checked") or 0
    assert checked == want["fingerprinted"] + 1  # (+ the index page)
    skipped = sum(stat(log, f"neardup/skipped/{r}") or 0 for r in ("binary", "empty", "too_short", "too_large"))
    assert checked + skipped == len(pages) + 1
    assert "Traceback" not in log
