"""The report in a real browser: Debian's chromium, headless, with no network,
driven through chromium-driver (tests/browser.py). The page renders without
console errors, every plot draws, no request leaves the file, and a crawl of
hostile pages (markup and script in titles, URLs and text) shows as text with
nothing run. Skips, saying why, without chromium, chromium-driver or selenium."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import browser, load, requests_made, why_not
from tests.conftest import ROOT
from tests.fixtures.http import PageServer
from tests.report_fixtures import hostile_site, synthetic_crawl

pytestmark = [pytest.mark.skipif(why_not() is not None, reason=str(why_not())),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:selenium")]
pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (the [report] extra)")

def _look(report: Path, shot: Path, height: int = 1600) -> dict:
    """Open ``report`` in chromium: what it logged, requested and drew, and whether anything ran."""
    with browser(1200, height) as driver:
        load(driver, report)
        seen = {
            "console": driver.get_log("browser"),
            "requests": requests_made(driver),
            "pwned": driver.execute_script("return window.__pwned === undefined ? null : String(window.__pwned)"),
            "images": driver.execute_script(
                "return [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])"),
            "scripts": driver.execute_script("return document.scripts.length"),
            "events": driver.execute_script(
                "return [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))"
                ".filter(n => n.startsWith('on'))"),
            "text": driver.execute_script("return document.body.innerText"),
            "plots": driver.execute_script("return document.querySelectorAll('img[src^=\"data:image/svg\"]').length"),
        }
        # open every cluster: its links and changed lines are in the DOM, and must not run either
        driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
        seen["pwned_after"] = driver.execute_script(
            "return window.__pwned === undefined ? null : String(window.__pwned)")
        driver.save_screenshot(str(shot))
    return seen


def _assert_clean(seen: dict, plots: int) -> None:
    assert seen["console"] == [], seen["console"]
    assert seen["pwned"] is None and seen["pwned_after"] is None
    assert seen["scripts"] == 0 and seen["events"] == []
    assert seen["plots"] == plots and len(seen["images"]) == plots
    assert all(done and w > 100 and h > 100 for done, w, h in seen["images"]), seen["images"]
    outside = [u for u in seen["requests"] if not u.startswith(("file://", "data:"))]
    assert outside == [], outside


def test_a_hostile_crawl_shows_as_text_and_nothing_runs(tmp_path):
    out, report = tmp_path / "crawl", tmp_path / "report.html"
    with PageServer(hostile_site) as server:
        r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "crawl", f"{server.url}/index.html",
                            "--out", str(out), "-s", "NEARDUP_DROPPED_TEXT_BYTES=1000000",
                            "-s", f"NEARDUP_REPORT={report}", "-s", "NEARDUP_WORKERS=0"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert report.is_file(), r.stderr[-3000:]  # written by the extension when the crawl closed
    html = report.read_text()
    assert 'id="clusters"' in html and '<span class="ins">' in html, html[-3000:]
    # the report's kept pages are the crawl's (the index also holds the pages passed through unchecked)
    kept = re.search(r"(\d+) kept", r.stderr)
    assert kept and f'<div class="card kept"><b>{kept[1]}</b><span>pages kept</span>' in html, r.stderr[-2000:]
    seen = _look(report, tmp_path / "hostile.png")
    _assert_clean(seen, plots=html.count('<img src="data:image/svg'))
    # the markup of titles and text, as text
    assert '<script>window.__pwned="script"</script>' in seen["text"]  # (a title)
    assert 'a changed line <script>window.__pwned="text"</script> <b onclick=alert(1)>bold</b>' in seen["text"]
    # the command makes the same report from the crawl's directory
    r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "report", str(out), "-o", str(tmp_path / "b.html")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Runs and resumes" in (tmp_path / "b.html").read_text()


def test_a_large_report_renders_every_plot(tmp_path):
    crawl = synthetic_crawl(tmp_path / "crawl", 20_000, hostile=True)
    report = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "report", str(crawl), "-o", str(report)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    seen = _look(report, tmp_path / "large.png", height=4800)
    _assert_clean(seen, plots=5)
    assert "&lt;" not in seen["text"]  # (escaped once: the reader sees <script>, not &lt;script&gt;)
    assert "window.__pwned=1</script>" in seen["text"]
