"""``neardup report``: what it reads, what it writes, and its one-line errors; the
records it reads that only it needs (dropped pages' text, the runs of a JOBDIR).
The report in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector

from scrapy_neardup.crawler.config import ConfigError, NearDupConfig
from scrapy_neardup.crawler.filter.captured_text import OVER_CAP, CapturedText, read_texts
from scrapy_neardup.crawler.filter.runs_log import RunsLog, read_runs, runs_path
from scrapy_neardup.crawler.report import build_report
from scrapy_neardup.crawler.report.render import changed_lines, csp, link
from scrapy_neardup.crawler.report.sources import ReportInputError, locate, read
from tests.report_fixtures import dedup_output, synthetic_crawl
from tests.test_cli import neardup, one_line_error

pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (the [report] extra)")


class _Stats(MemoryStatsCollector):
    def __init__(self) -> None:
        self._stats: dict = {}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> Path:
    return synthetic_crawl(tmp_path_factory.mktemp("report") / "crawl", 3000, hostile=True)


def _body(html: str) -> str:
    return html.split("</style>", 1)[1]


def _elements(html: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The tag names and the (name, value) attributes of an HTML text, as a browser's parser reads them."""
    from html.parser import HTMLParser

    tags: set[str] = set()
    attributes: list[tuple[str, str]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.add(tag)
            attributes.extend((name, value or "") for name, value in attrs)

    Parser().feed(html)
    return tags, attributes


def test_a_crawl_directory_makes_one_file_with_every_section(crawl, tmp_path):
    out = tmp_path / "r.html"
    size = build_report(crawl, out)
    html = out.read_text()
    assert size == len(html.encode())
    for section in ("time", "where", "clusters", "avoided", "rules", "languages", "runs"):
        assert f'<section id="{section}">' in html, section
    assert html.count('<img src="data:image/svg+xml;base64,') == 5
    # aggregates, not lists: 3,000 pages, a few hundred kilobytes
    assert size < 600_000
    assert "2 runs, 1 of them resuming the one before" in html and "killed" in html
    assert "about " in html and " not downloaded" in html  # (bytes saved, from the runs that closed)
    assert '<span class="del">' in html and '<span class="ins">' in html  # the changed lines of a pair


def test_page_strings_are_data_never_markup(crawl, tmp_path):
    out = tmp_path / "r.html"
    build_report(crawl, out)
    body = _body(out.read_text())
    # no element comes from a page: no script at all, no event attribute, no javascript: link
    tags, attributes = _elements(body)
    assert "script" not in tags and not any(name.startswith("on") for name, _ in attributes)
    assert tags <= {"header", "h1", "h2", "p", "main", "section", "div", "b", "span", "img", "table", "thead",
                    "tbody", "tr", "th", "td", "a", "details", "summary", "pre", "br", "footer", "body", "html", "q"}
    assert all(value.startswith(("https://", "http://")) for name, value in attributes if name == "href")
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body  # shown, as text
    assert "javascript:window.__pwned=4//0" in body


def test_the_policy_allows_its_own_style_and_data_images_only():
    policy = csp()
    assert "default-src 'none'" in policy and "script-src 'none'" in policy and "img-src data:" in policy
    assert "unsafe" not in policy and "http" not in policy
    assert link("javascript:alert(1)") == "javascript:alert(1)"
    assert link('https://h/"><b>') == '<a href="https://h/&quot;&gt;&lt;b&gt;" rel="noreferrer noopener">' \
                                     'https://h/&quot;&gt;&lt;b&gt;</a>'


def test_changed_lines_are_the_lines_that_differ():
    html = changed_lines("a\nb\nc <i>", "a\nB\nc <i>")
    assert '<span class="del">-b</span>' in html and '<span class="ins">+B</span>' in html
    assert "&lt;i&gt;" not in html  # (an unchanged line is not shown)
    assert "same" in changed_lines("x\ny", "x\ny")


@pytest.mark.parametrize("where", ["store", "job", "store/duplicates.jsonl"])
def test_a_store_a_jobdir_or_a_duplicates_file_is_read_too(crawl, where, tmp_path):
    if where == "job":  # (a JOBDIR whose store is JOBDIR/neardup, as Scrapy projects have it)
        job = tmp_path / "job"
        (job / "neardup").mkdir(parents=True)
        for f in (crawl / "store").iterdir():
            (job / "neardup" / f.name).write_bytes(f.read_bytes())
        (job / "neardup" / "runs.jsonl").write_bytes((crawl / "job" / "neardup" / "runs.jsonl").read_bytes())
        path = job
    else:
        path = crawl / where
    data = read(locate(path))
    assert data.dropped == 750 and data.avoided == 150 and data.rules
    assert data.skipped_lines == 0  # (the last line a kill cut short is no damage)
    if where == "job":
        assert len(data.runs) == 3


def test_neardup_crawls_jobdir_is_read_as_its_crawl(crawl, tmp_path):
    """``neardup crawl --out DIR`` keeps its store in DIR/store and its JOBDIR in DIR/job (whose
    neardup/ has the runs only): the report and the rules of DIR/job are DIR's. A JOBDIR whose store
    is elsewhere is refused, saying so."""
    data = read(locate(crawl / "job"))
    assert data.dropped == 750 and data.inputs.index is not None and len(data.runs) == 3
    r = neardup("rules", str(crawl / "job"))
    assert r.returncode == 0 and r.stdout == neardup("rules", str(crawl)).stdout, r.stderr
    alone = tmp_path / "job"
    (alone / "neardup").mkdir(parents=True)
    (alone / "neardup" / "runs.jsonl").write_bytes((crawl / "job" / "neardup" / "runs.jsonl").read_bytes())
    with pytest.raises(ReportInputError, match="a JOBDIR whose store is elsewhere"):
        locate(alone)


def test_a_dedup_output_is_read_from_its_summary_and_duplicates(tmp_path):
    out = dedup_output(tmp_path / "dedup")
    build_report(out, tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert "neardup dedup output" in html and "&lt;b&gt;docs.jsonl&lt;/b&gt;" in html
    assert 'id="rules"' not in html and 'id="avoided"' not in html
    data = read(locate(out))
    assert data.dropped == 3 and data.hosts == {"docs.jsonl": 2, "a.example": 1}
    assert data.clusters[0].twin == "doc-0" and data.clusters[0].size == 2


def _refused(path: Path, out: Path, capsys, *words: str) -> None:
    """``neardup report path -o out`` (in this process) says why in one line and exits with 2."""
    from scrapy_neardup.crawler.commands.report import command

    assert command([str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("neardup report: "), err
    assert all(word in err for word in words), err


def test_bad_input_is_one_line_and_exit_2(crawl, tmp_path, capsys):
    out = tmp_path / "r.html"
    _refused(tmp_path / "nothing", out, capsys, "no such file")
    (tmp_path / "empty").mkdir()
    _refused(tmp_path / "empty", out, capsys, "is not a crawl")
    damaged = tmp_path / "damaged"
    (damaged / "store").mkdir(parents=True)
    (damaged / "index.sqlite3").write_bytes(b"not sqlite at all " * 100)
    _refused(damaged, out, capsys, "index.sqlite3", "not an SQLite file")
    (damaged / "index.sqlite3").unlink()
    (damaged / "store" / "duplicates.jsonl").write_text('{"url": "a", "duplicate_of": "b", "distance": 1}\n')
    (damaged / "store" / "store.sqlite3").write_bytes(b"\0" * 4096)
    _refused(damaged, out, capsys, "store.sqlite3")
    (damaged / "store" / "store.sqlite3").unlink()
    (damaged / "store" / "url_rules.sqlite3").write_bytes(b"SQLite format 3\0" + b"\xff" * 2000)
    _refused(damaged, out, capsys, "url_rules.sqlite3")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n[1, 2]\n")
    _refused(junk, out, capsys, "is not a duplicates file")
    assert not out.exists()
    # and as a command of its own, in a process of its own
    one_line_error(neardup("report", str(tmp_path / "empty"), "-o", str(out)), 2, "is not a crawl")
    one_line_error(neardup("report", "redis://127.0.0.1:9/0?prefix=neardup", "-o", str(out)), 2,
                   "redis://127.0.0.1:9/0?prefix=neardup is a URL", "JOBDIR")


def test_the_command_writes_the_report(crawl, tmp_path):
    r = neardup("report", str(crawl), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and (tmp_path / "r.html").stat().st_size > 10_000
    assert "report PATH" in neardup("--help").stdout
    # "-" is standard output, not a file named "-"
    r = neardup("report", str(crawl), "-o", "-", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>") and r.stdout.rstrip().endswith("</html>")
    assert "wrote standard output" in r.stderr and not (tmp_path / "-").exists()


def test_a_requeued_line_withdraws_an_avoided_one(tmp_path):
    """A request a rule left out and then made after all is not avoided, as the crawl's
    neardup/requests_avoided says; the requeued line (no duplicate_of) is not a damaged line."""
    d = tmp_path / "store"
    d.mkdir()
    avoided = '{{"id": "http://h/{0}", "url": "http://h/{0}", "duplicate_of": "http://h/a", "avoided": true, ' \
              '"rule": "param * sid", "time": "2026-11-26T10:00:0{1}+00:00"}}\n'
    (d / "duplicates.jsonl").write_text(
        '{"url": "http://h/b", "duplicate_of": "http://h/a", "distance": 2}\n'
        + avoided.format("a?sid=1", 1) + avoided.format("a?sid=2", 2)
        + '{"id": "http://h/a?sid=1", "url": "http://h/a?sid=1", "requeued": true, "rule": "param * sid", '
          '"time": "2026-11-26T10:00:03+00:00"}\n')
    data = read(locate(d))
    assert (data.dropped, data.avoided, data.skipped_lines) == (1, 1, 0)
    assert data.avoided_by_rule == {"param * sid": 1} and len(data.avoided_times) == 1


def test_a_damaged_line_is_skipped_and_counted(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    (d / "duplicates.jsonl").write_text('{"url": "http://h/a", "duplicate_of": "http://h/b", "distance": 2}\n'
                                        "{oops\n")
    data = read(locate(d))
    assert data.dropped == 1 and data.skipped_lines == 1


# -- the records the report reads ------------------------------------------------------

def test_captured_text_stops_at_its_cap_and_counts_the_rest(tmp_path):
    stats = _Stats()
    path = tmp_path / "dropped_text.sqlite3"
    cap = CapturedText(path, 300, stats)
    cap.add("http://h/1", "first page text " * 10)
    cap.add("http://h/1", "again: kept once")
    for i in range(2, 40):
        cap.add(f"http://h/{i}", f"page {i} " + "x y z " * i * 20)
    cap.close()
    texts = read_texts(path, {"http://h/1", "http://h/2", "http://h/39"})
    assert texts["http://h/1"].startswith("first page text") and "http://h/39" not in texts
    assert stats.get_value(OVER_CAP) > 0
    assert sum(len(b) for (b,) in sqlite3.connect(path).execute("SELECT text FROM dropped_text")) <= 300
    # a resumed crawl goes on filling the same budget
    again = CapturedText(path, 300, stats)
    assert again.size == sum(len(b) for (b,) in sqlite3.connect(path).execute("SELECT text FROM dropped_text"))
    again.close()


def test_a_runs_file_says_each_start_and_close(tmp_path):
    stats = _Stats()
    stats.set_value("neardup/fetched", 5)
    stats.set_value("neardup/frontier/redelivered", 2)
    first = RunsLog(tmp_path, stats)
    first.started(0)  # (killed: no close)
    second = RunsLog(tmp_path, stats)
    second.started(7)
    second.closed("finished")
    with open(runs_path(tmp_path), "a") as fh:
        fh.write('{"event": "start", "ti')  # a line a kill cut short
    lines, bad = read_runs(runs_path(tmp_path))
    assert [(x["event"], x.get("resume")) for x in lines] == [("start", False), ("start", True), ("close", None)]
    assert lines[1]["fingerprints"] == 7 and lines[1]["redelivered"] == 2 and lines[2]["fetched"] == 5
    assert bad == 1


def test_the_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="NEARDUP_DROPPED_TEXT_BYTES"):
        NearDupConfig.from_settings(Settings({"NEARDUP_DROPPED_TEXT_BYTES": 1000}))
    with pytest.raises(ConfigError, match="NEARDUP_DROPPED_TEXT_BYTES must be"):
        NearDupConfig.from_settings(Settings({"NEARDUP_DROPPED_TEXT_BYTES": -1, "JOBDIR": str(tmp_path)}))
    with pytest.raises(ConfigError, match="NEARDUP_REPORT"):
        NearDupConfig.from_settings(Settings({"NEARDUP_REPORT": "http://h/r.html"}))
    config = NearDupConfig.from_settings(Settings({"JOBDIR": str(tmp_path), "NEARDUP_DROPPED_TEXT_BYTES": "10",
                                                   "NEARDUP_REPORT": str(tmp_path / "r.html")}))
    assert config.dropped_text_bytes == 10 and config.report == str(tmp_path / "r.html")
    assert NearDupConfig.from_settings(Settings({})).dropped_text_bytes == 0


def test_a_report_without_matplotlib_is_refused_as_the_crawl_starts(tmp_path, monkeypatch):
    """Not after the whole crawl, as it was (``could not write the report``)."""
    import importlib.util

    from scrapy.utils.test import get_crawler

    from scrapy_neardup.crawler.report.extension import ReportExtension

    crawler = get_crawler(settings_dict={"NEARDUP_REPORT": str(tmp_path / "r.html"), "JOBDIR": str(tmp_path / "j")})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(ConfigError, match=r"NEARDUP_REPORT: .*matplotlib.*scrapy-neardup\[report\]"):
        ReportExtension.from_crawler(crawler)


def test_the_add_on_adds_the_report_extension_only_when_asked(tmp_path):
    from scrapy_neardup.crawler.addon import NearDupAddon, REPORT_EXTENSION

    for value, wanted in ((None, False), (str(tmp_path / "r.html"), True)):
        settings = Settings({"NEARDUP_REPORT": value} if value else {})
        NearDupAddon().update_settings(settings)
        names = {getattr(k, "__module__", "") + "." + getattr(k, "__name__", str(k))
                 for k in settings.getdict("EXTENSIONS")}
        assert (REPORT_EXTENSION in names) is wanted, names


def test_a_crawl_records_what_the_report_needs_and_writes_it_when_it_closes(tmp_path):
    """A real crawl (twice: the second run is a resume) with NEARDUP_DROPPED_TEXT_BYTES and NEARDUP_REPORT."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.fixtures.http import PageServer
    from tests.report_fixtures import hostile_site

    out, report = tmp_path / "crawl", tmp_path / "report.html"
    with PageServer(hostile_site) as server:
        for run in range(2):
            r = subprocess.run([sys.executable, "-m", "scrapy_neardup", "crawl", f"{server.url}/index.html",
                                "--out", str(out), "-s", "NEARDUP_DROPPED_TEXT_BYTES=1000000",
                                "-s", f"NEARDUP_REPORT={report}", "-s", "NEARDUP_WORKERS=0"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
    assert "'neardup/dropped_text/captured': 3" not in r.stderr  # (the second run drops nothing new)
    lines, bad = read_runs(out / "job" / "neardup" / "runs.jsonl")
    assert bad == 0 and [(x["event"], x.get("resume")) for x in lines] == [
        ("start", False), ("close", None), ("start", True), ("close", None)]
    assert lines[1]["dropped"] == 3 and lines[2]["fingerprints"] == lines[1]["kept"]
    captured = out / "store" / "dropped_text.sqlite3"
    urls = {url for (url,) in sqlite3.connect(captured).execute("SELECT url FROM dropped_text")}
    dropped = {json.loads(line)["url"] for line in (out / "store" / "duplicates.jsonl").open()}
    assert urls == dropped and len(urls) == 3
    assert all("a changed line" in t for t in read_texts(captured, urls).values())
    html = report.read_text()
    assert "2 runs, 1 of them resuming the one before" in html and '<span class="ins">+a changed line' in html


def test_the_ranged_gets_are_in_the_url_rules_part_summed_over_the_runs_or_from_the_crawls_stats(tmp_path):
    """Confirmation by content (``NEARDUP_URL_RULES_CONFIRM_BYTES``): each closing run's
    ranged-GET counts go to its runs line, and the report adds them up in its requests-avoided
    section; a crawl with no runs file (no ``JOBDIR``) that writes its report shows its own stats."""
    from scrapy_neardup.crawler.counts import RANGED_GET_STATS
    from scrapy_neardup.crawler.report.render import render
    from scrapy_neardup.crawler.report.sources import Inputs

    values = dict(zip(RANGED_GET_STATS, (80, 100, 25_600, 20, 9, 3, 1_200_000)))
    for run in range(2):  # two runs that close, each with these counts
        stats = _Stats()
        for key, value in values.items():
            stats.set_value(key, value)
        log = RunsLog(tmp_path, stats)
        log.started(0)
        log.closed("finished")
    lines, _ = read_runs(runs_path(tmp_path))
    assert lines[1]["ranged"] == {"range_confirmed": 80, "ranged_gets": 100, "ranged_bytes": 25_600,
                                  "range_mismatch": 20, "range_whole": 9, "unconfirmable": 3,
                                  "bytes_saved_estimate": 1_200_000}
    data = read(Inputs("crawl", "here", runs=runs_path(tmp_path)))
    assert data.ranged["range_confirmed"] == 160 and data.ranged["bytes_saved_estimate"] == 2_400_000
    html = render(data)
    avoided = html.split('<section id="avoided">', 1)[1].split("</section>", 1)[0]
    assert "Copies confirmed by content" in avoided and "20.0% of the ranged GETs did not match" in avoided
    for words in ("answered with the range", "copies confirmed", "did not match", "answered whole", "unchecked",
                  "bytes of the ranged GETs", "an estimate"):
        assert words in avoided, words
    assert ">200<" in avoided and ">160<" in avoided and ">40<" in avoided and ">18<" in avoided and ">6<" in avoided
    # without a runs file: the crawl's own stats (NEARDUP_REPORT); a crawl without ranged GETs says nothing of them
    own = read(Inputs("crawl", "here", stats={key: value for key, value in values.items()}))
    assert own.ranged["ranged_gets"] == 100 and "Copies confirmed by content" in render(own)
    assert "Copies confirmed by content" not in render(read(Inputs("crawl", "here", stats={"neardup/fetched": 3})))


def test_a_crawl_with_no_duplicates_file_reports_its_stats_and_says_so(tmp_path):
    """NEARDUP_REPORT on a crawl with no JOBDIR, store or duplicates file: it read no file of its drops
    and said "Nothing was dropped as a near-duplicate" of a crawl that dropped 45. Its stats say how many."""
    from scrapy_neardup.crawler.report.render import render
    from scrapy_neardup.crawler.report.sources import Inputs

    data = read(Inputs("crawl", "here", stats={"neardup/kept": 70, "neardup/dropped": 45,
                                               "neardup/requests_avoided": 4}))
    assert (data.kept, data.dropped, data.avoided) == (70, 45, 4)
    html = render(data)
    assert "Nothing was dropped" not in html and "kept no duplicates file" in html and "<b>45</b>" in html
    # a crawl that did keep one reads it, not its stats
    dups = tmp_path / "duplicates.jsonl"
    dups.write_text(json.dumps({"url": "http://h/b", "duplicate_of": "http://h/a", "distance": 1}) + "\n")
    data = read(Inputs("crawl", "here", duplicates=dups, stats={"neardup/dropped": 45}))
    assert data.dropped == 1 and not data.counts_from_stats


def test_a_chart_that_leaves_languages_out_says_so_and_urls_read_as_a_browser_shows_them(monkeypatch):
    from collections import Counter

    from scrapy_neardup.crawler.report import render
    from scrapy_neardup.crawler.report.sources import CrawlData, Inputs

    data = CrawlData(Inputs("crawl", "x"))
    # (a crawl of 22 languages showed 15 bars and said nothing of the 7 others, 18% of its pages)
    data.languages = Counter({f"l{i:02d}": 100 - i for i in range(22)})
    drawn = []
    monkeypatch.setattr(render.plots, "bars", lambda rows, *a, **k: drawn.append(rows) or "<svg/>")
    assert "14 most common of 22 languages" in render._languages_section(data)
    assert len(drawn[0]) == 15 and drawn[0][-1] == ("8 others", sum(100 - i for i in range(14, 22)))
    # percent-escaped non-ASCII shown as its characters; the link itself, and ASCII escapes, as they are
    url = "http://h.example/%E6%8C%87%E5%8D%97/a%2Fb%20c%FF.html"
    assert link(url) == ('<a href="http://h.example/%E6%8C%87%E5%8D%97/a%2Fb%20c%FF.html" '
                         'rel="noreferrer noopener">http://h.example/指南/a%2Fb%20c%FF.html</a>')
    assert render.readable("/%E2%80%AE%C3%A9/") == "/%E2%80%AE%C3%A9/"  # (a bidi override: not printable)
    # a shared crawl's JOBDIR: requests avoided by rules whose book is on Redis, not "no rule was learned"
    data.avoided = 3
    assert "keeps it on its Redis" in render._rules_section(data)


def test_a_spark_jobs_output_and_a_store_alone(tmp_path):
    """The Spark job writes OUT/duplicates/ as part files: the report said "not a crawl" beside its
    summary.json. A store alone (a neardup dedup --store run's) has no duplicates file: the report said
    "Nothing was dropped" of a run that dropped thousands."""
    from scrapy_neardup.dedup import SimhashStore
    from scrapy_neardup.dedup.cli import main as dedup_main

    out = tmp_path / "spark"
    (out / "duplicates").mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps({"records": 5, "kept": 2, "dropped": 3}))
    lines = [json.dumps({"id": f"d{i}", "duplicate_of": "k0", "distance": i % 3}) for i in range(3)]
    (out / "duplicates" / "part-00000").write_text("\n".join(lines[:2]) + "\n")
    (out / "duplicates" / "part-00001").write_text(lines[2] + "\n")
    (out / "duplicates" / "_SUCCESS").write_text("")
    for where in (out, out / "duplicates"):
        data = read(locate(where))
        assert data.inputs.kind == "dedup" and data.dropped == 3 and dict(data.distances) == {0: 1, 1: 1, 2: 1}
    store = tmp_path / "store"
    SimhashStore.open(store, max_distance=3).close()
    assert dedup_main(["stats", str(store), "--duplicates", str(out / "duplicates")]) == 0
    build_report(store, tmp_path / "r.html")
    html = _body((tmp_path / "r.html").read_text())
    assert "No duplicates file" in html and "Nothing was dropped" not in html and "dropped as near" not in html


def test_copies_confirmed_by_a_ranged_get_are_not_requests_avoided(tmp_path):
    """A predicted copy confirmed by a ranged GET was requested (its body never downloaded): the report
    counted its line as a request not made, and said "182 requests were not made" of a crawl whose summary
    said 0 requests avoided and 182 copies confirmed. Its line says ``"confirmed": true``, and the report
    counts it with the ranged GETs only."""
    import json

    from scrapy_neardup.crawler.report.render import render
    from scrapy_neardup.crawler.report.sources import Inputs

    path = tmp_path / "duplicates.jsonl"
    base = {"duplicate_of": "http://h/en/a.html", "rule": "prefix h /de/api/ /en/api/", "referer": None,
            "time": "2026-11-27T08:00:00+00:00"}
    path.write_text("\n".join(json.dumps({"id": u, "url": u, "avoided": True, **base, **extra}) for u, extra in (
        ("http://h/de/api/a.html", {"confirmed": True}), ("http://h/fr/api/a.html", {}))) + "\n")
    data = read(Inputs("crawl", "here", duplicates=path))
    assert data.avoided == 1
    assert "1 requests were not made" in render(data) or "1 request was not made" in render(data)
    # (with no runs file and no stats, the confirmed copies are still said: from their lines)
    assert data.confirmed_lines == 1 and "1 copies were confirmed (their lines in the duplicates file" in render(data)
