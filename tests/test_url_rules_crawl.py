"""Real crawls of the generated trap site: the URL rules learned, the requests
avoided, and no page with other content ever avoided (issue 16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.conftest import ROOT
from tests.fixtures.trap_site import TrapSite
from tests.test_crawl import read_jsonl, scrapy_crawl, stat


def crawl(site: TrapSite, out: Path, *settings: str) -> tuple[list[str], list[dict], str]:
    """(targets requested, in order; the avoided requests' records; the log)."""
    with site.serve() as server:
        r = scrapy_crawl(server.url + "/", out, f"NEARDUP_STORE={out / 'store'}", "NEARDUP_INDEX=", *settings)
        assert r.returncode == 0, r.stderr[-3000:]
        targets = [t for t in server.requests if t != "/robots.txt"]
    avoided = [d for d in read_jsonl(out / "store" / "duplicates.jsonl") if d.get("avoided")]
    return targets, avoided, r.stderr


def target(url: str) -> str:
    p = urlsplit(url)
    return (p.path or "/") + (f"?{p.query}" if p.query else "")


def duplicate_downloads(site: TrapSite, targets: list[str]) -> int:
    seen: set[str] = set()
    n = 0
    for t in targets:
        what = site.truth(t)
        n += what in seen
        seen.add(what)
    return n


def test_the_trap_site_learns_its_traps_and_skips_them(tmp_path):
    site = TrapSite()
    plain, _, _ = crawl(site, tmp_path / "plain", "NEARDUP_ENABLED=False")
    targets, avoided, log = crawl(site, tmp_path / "rules")
    # every avoided URL would have served what the page it was mapped to served
    assert avoided and all(site.truth(target(a["url"])) == site.truth(target(a["duplicate_of"])) for a in avoided)
    assert all(set(a) >= {"url", "duplicate_of", "rule", "referer", "time"} for a in avoided)
    # nothing distinct was lost: every content plain Scrapy fetched was fetched
    assert {site.truth(t) for t in targets} == {site.truth(t) for t in plain}
    # each kind of trap was learned and acted on
    used = {a["rule"].split()[0] + " " + a["rule"].split()[2] for a in avoided}
    assert {"param sid", "prefix /mirror/", "suffix /index.html"} <= used, used
    assert stat(log, "neardup/requests_avoided") == len(avoided)
    assert stat(log, "neardup/url_rules/learned") >= 3
    # most of what plain Scrapy downloads twice is never downloaded (the benchmark measures it)
    assert duplicate_downloads(site, targets) < 0.2 * duplicate_downloads(site, plain)
    # the command lists the rules
    out = subprocess.run([sys.executable, "-m", "scrapy_neardup", "rules", str(tmp_path / "rules")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "active" in out.stdout and "/mirror/" in out.stdout, out.stderr


def test_a_rule_that_stops_holding_is_retired_and_what_it_avoided_is_fetched(tmp_path):
    """``?lang=xx`` changes nothing on the first half of a chain of documents and
    gives a translated page on the second: the rule learned on the first half
    is retired at the first explored counter-example, and the requests it had
    avoided are made after all, so no translated page is missing at the end."""
    site = TrapSite(changing=True)
    targets, avoided, log = crawl(site, tmp_path / "rules", "NEARDUP_URL_RULES_EXPLORE=0.2")
    assert stat(log, "neardup/url_rules/learned") >= 1
    assert stat(log, "neardup/url_rules/retired") == 1
    assert "URL rule retired: 'param" not in log and "URL rule retired: param" in log
    lang = [a for a in avoided if "lang=" in a["url"]]
    assert lang and stat(log, "neardup/url_rules/requeued") >= len(lang)
    fetched = {site.truth(t) for t in targets}
    assert {f"translated {i}" for i in range(site.n // 2, site.n)} <= fetched
    assert {f"doc {i}" for i in range(site.n)} <= fetched


def test_rules_can_be_switched_off_pinned_or_forbidden(tmp_path):
    site = TrapSite(n=30)
    _, avoided, log = crawl(site, tmp_path / "off", "NEARDUP_URL_RULES=False")
    assert not avoided and stat(log, "neardup/requests_avoided") is None
    assert "AvoidMiddleware" not in log.split("Enabled downloader middlewares")[1].split("]")[0]
    _, avoided, _ = crawl(site, tmp_path / "forbid", 'NEARDUP_URL_RULES_FORBID=["prefix * /mirror/ /"]',
                          "NEARDUP_URL_RULES_MIN_EVIDENCE=3")
    assert avoided and not any("/mirror/" in a["rule"] for a in avoided)
    _, avoided, _ = crawl(site, tmp_path / "pin", 'NEARDUP_URL_RULES_PIN=["param * sid"]',
                          "NEARDUP_URL_RULES_MIN_EVIDENCE=1000")
    assert avoided and {a["rule"] for a in avoided} == {"param '*' sid"}
    rows = json.loads(json.dumps([a["url"] for a in avoided]))
    assert all("sid=" in u or "/doc/" in u for u in rows)
