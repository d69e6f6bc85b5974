"""Local feed files written exactly once across kills (``crawler.frontier.feeds``),
step by step: the real exporters write through the ledger to a real frontier
file; a "kill" abandons the process's objects with what was flushed on disk.
The crawl-level kill tests are in ``tests/test_kill_resume.py``."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from scrapy.extensions.feedexport import feed_complete_default_values_from_settings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from scrapy_neardup.crawler.addon import FEED_STORAGE, NearDupAddon
from scrapy_neardup.crawler.frontier.acks import ID_KEY
from scrapy_neardup.crawler.frontier.db import FrontierDB
from scrapy_neardup.crawler.frontier.feeds import DurableFeedStorage, FeedLedger, shape_of

FORMATS = {"jsonlines": ".jsonl", "json": ".json", "csv": ".csv", "xml": ".xml"}


def parse(path: Path, fmt: str) -> list[str]:
    """The item URLs of the feed file, which must be one valid document."""
    text = path.read_text()
    if fmt == "jsonlines":
        return [json.loads(line)["url"] for line in text.splitlines()]
    if fmt == "json":
        return [i["url"] for i in json.loads(text)]
    if fmt == "xml":
        return [i.findtext("url") or "" for i in ET.fromstring(text).iter("item")]
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["url", "n"] and ["url", "n"] not in rows[1:]
    return [r[0] for r in rows[1:]]


class Run:
    """One process's crawl: a frontier, a ledger, one feed exporter on ``path``."""

    def __init__(self, jobdir: Path, path: Path, fmt: str, mode: str = "ab") -> None:
        self.crawler = get_crawler(settings_dict={"FEED_EXPORT_INDENT": 0})
        self.db = FrontierDB(jobdir)
        self.ledger = FeedLedger.of(self.crawler)
        self.ledger.attach(self.db)
        options = feed_complete_default_values_from_settings({"format": fmt}, self.crawler.settings)
        shape = shape_of(self.crawler, options)
        assert shape is not None
        self.file = self.ledger.open(str(path), mode, shape)
        cls = load_object(self.crawler.settings.getwithbase("FEED_EXPORTERS")[fmt])
        self.exporter = cls(self.file, indent=0)
        self.exporter.start_exporting()

    def item(self, url: str, rid: int) -> None:
        self.exporter.export_item({"url": url, "n": rid})
        response = SimpleNamespace(request=SimpleNamespace(meta={ID_KEY: rid}))
        self.ledger._item_scraped(response=response)

    def commit(self, rids: list[int]) -> tuple[list[int], set[int]]:
        done, held = self.ledger.settle(rids)
        self.db.ack(done)
        self.db.commit()
        return done, held

    def kill(self) -> None:
        """SIGKILL: what the process buffered is lost, the file lock goes."""
        self.file._fh.raw.close()  # type: ignore[attr-defined]  (its Python buffer is dropped)
        self.db.db.close()
        self.db._db = None
        self.db.close()

    def finish(self) -> None:
        self.ledger.settle([])
        self.ledger.detach()
        self.db.close()
        self.exporter.finish_exporting()
        self.file.close()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_killed_feed_is_cut_closed_and_continued(fmt, tmp_path):
    path = tmp_path / f"feed{FORMATS[fmt]}"
    run = Run(tmp_path / "job", path, fmt)
    run.item("u1", 1)
    run.item("u2", 2)
    run.item("u3", 3)
    assert run.commit([1, 3]) == ([1], {3})  # u3 follows u2, whose request is not acknowledged
    run.kill()

    run = Run(tmp_path / "job", path, fmt)  # the resume: u2 and u3 are fetched again
    # ... the file was cut after u1 and closed when the frontier opened, then opened again to go on
    run.item("u2", 2)
    run.item("u3", 3)
    run.item("u4", 4)
    run.commit([2, 3])
    run.kill()
    Run(tmp_path / "job", tmp_path / "other.jsonl", "jsonlines").finish()
    assert parse(path, fmt) == ["u1", "u2", "u3"]

    run = Run(tmp_path / "job", path, fmt)
    run.item("u4", 4)
    run.commit([4])
    run.finish()
    assert parse(path, fmt) == ["u1", "u2", "u3", "u4"]


@pytest.mark.parametrize("fmt", ["json", "xml", "csv"])
def test_a_new_file_per_run_is_closed_at_the_next_open(fmt, tmp_path):
    first, second = tmp_path / f"run-1{FORMATS[fmt]}", tmp_path / f"run-2{FORMATS[fmt]}"
    run = Run(tmp_path / "job", first, fmt)
    run.item("u1", 1)
    run.item("u2", 2)
    run.commit([1])
    run.kill()
    run = Run(tmp_path / "job", second, fmt)
    run.item("u2", 2)
    run.commit([2])
    run.finish()
    assert parse(first, fmt) == ["u1"]
    assert parse(second, fmt) == ["u2"]


@pytest.mark.parametrize("fmt", ["json", "xml", "csv"])
def test_an_empty_last_run_leaves_the_document_whole(fmt, tmp_path):
    """FEED_STORE_EMPTY (Scrapy's default): a run that exports nothing opens the feed
    at its close, after the frontier closed; the file stays one document."""
    path = tmp_path / f"feed{FORMATS[fmt]}"
    run = Run(tmp_path / "job", path, fmt)
    run.item("u1", 1)
    run.commit([1])
    run.kill()
    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path / "job"), "FEED_EXPORT_INDENT": 0})
    ledger = FeedLedger.of(crawler)
    db = FrontierDB(tmp_path / "job")
    ledger.attach(db)  # (the resume: the document is closed here)
    ledger.detach()
    db.close()
    options = feed_complete_default_values_from_settings({"format": fmt}, crawler.settings)
    storage = DurableFeedStorage(str(path), feed_options=options, crawler=crawler)
    exporter = load_object(crawler.settings.getwithbase("FEED_EXPORTERS")[fmt])(storage.open(None), indent=0)
    exporter.start_exporting()
    exporter.finish_exporting()
    assert parse(path, fmt) == ["u1"]


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_an_empty_document_no_run_recorded_is_replaced_by_the_resumes(fmt, tmp_path):
    """A run that stopped before its first item was recorded (its disk full as the feed was
    recorded) leaves FEED_STORE_EMPTY's empty document, written at its close by Scrapy's own
    storage, of which the ledger has no row: the resume's document takes its place rather than
    following it (two documents in one file are no JSON or XML file)."""
    path = tmp_path / f"feed{FORMATS[fmt]}"
    crawler = get_crawler(settings_dict={"FEED_EXPORT_INDENT": 0})
    with open(path, "wb") as fh:
        exporter = load_object(crawler.settings.getwithbase("FEED_EXPORTERS")[fmt])(fh, indent=0)
        exporter.start_exporting()
        exporter.finish_exporting()
    assert parse(path, fmt) == []
    run = Run(tmp_path / "job", path, fmt)  # the resume
    run.item("u1", 1)
    run.commit([1])
    run.finish()
    assert parse(path, fmt) == ["u1"]


def test_a_kill_before_any_acknowledgement_leaves_an_empty_document(tmp_path):
    path = tmp_path / "feed.json"
    run = Run(tmp_path / "job", path, "json")
    run.item("u1", 1)
    run.kill()
    Run(tmp_path / "job", tmp_path / "other.jsonl", "jsonlines").finish()
    assert json.loads(path.read_text()) == []


def test_overwrite_starts_a_new_document(tmp_path, caplog):
    """``-O`` on a resume starts the file again, as Scrapy does, and says that the earlier runs' items,
    whose pages are not fetched again, are gone from it."""
    path = tmp_path / "feed.json"
    run = Run(tmp_path / "job", path, "json", mode="wb")  # -O, a first run: nothing to say
    run.item("u1", 1)
    run.commit([1])
    run.finish()
    assert "overwritten" not in caplog.text
    run = Run(tmp_path / "job", path, "json", mode="wb")  # -O again
    run.item("u2", 2)
    run.commit([2])
    run.finish()
    assert parse(path, "json") == ["u2"]
    assert f"feed {path} is overwritten (-O, FEEDS overwrite) on a crawl resumed from JOBDIR" in caplog.text


def test_items_of_no_frontier_request_do_not_hold_the_others(tmp_path):
    path = tmp_path / "feed.jsonl"
    run = Run(tmp_path / "job", path, "jsonlines")
    run.item("u0", None)  # type: ignore[arg-type]  (an item the spider's start yields)
    run.item("u1", 1)
    assert run.commit([1]) == ([1], set())
    run.finish()


def test_the_storage_is_installed_only_with_the_durable_frontier():
    from scrapy.settings import Settings

    for given, ours in [({"JOBDIR": "job"}, True), ({}, False), ({"JOBDIR": "job", "NEARDUP_FRONTIER": False}, False)]:
        settings = Settings(given)
        NearDupAddon().update_settings(settings)
        storages = settings.getwithbase("FEED_STORAGES")
        assert (storages["file"] == FEED_STORAGE) is ours and (storages[""] == FEED_STORAGE) is ours
    settings = Settings({"JOBDIR": "job", "FEED_STORAGES": {"file": "my.Storage"}})
    NearDupAddon().update_settings(settings)
    assert settings.getwithbase("FEED_STORAGES")["file"] == "my.Storage"


def test_gzip_batches_and_other_exporters_stay_at_least_once():
    crawler = get_crawler()
    base = {"format": "jsonlines"}
    assert shape_of(crawler, feed_complete_default_values_from_settings(dict(base), crawler.settings))
    for extra in ({"postprocessing": ["scrapy.extensions.postprocessing.GzipPlugin"]}, {"batch_item_count": 10},
                  {"format": "pickle"}):
        options = feed_complete_default_values_from_settings({**base, **extra}, crawler.settings)
        assert shape_of(crawler, options) is None, extra


#: A spider whose items have another field first in its second run (``-a run=2``)
CSV_SPIDER = '''
import scrapy


class CsvFieldsSpider(scrapy.Spider):
    name = "csvfields"

    def __init__(self, start="", run="1", **kwargs):
        self.start_urls = [start]
        self.run = run
        super().__init__(**kwargs)

    def parse(self, response):
        item = {"url": response.url, "title": response.css("title::text").get()}
        yield {"extra": 1, **item} if self.run == "2" else item
        yield from response.follow_all(css="a")
'''


def test_a_resumed_csv_feed_keeps_the_columns_of_its_document(tmp_path):
    """A CSV exporter takes its columns from its first item. Resumed, the crawl's exporter took them from the
    resumed run's first item, of other fields: a second header row came mid-file, its rows of other columns.
    The resumed exporter now writes the document's columns, as one uninterrupted run's would have."""
    import subprocess
    import sys

    from tests.fixtures import linked_back
    from tests.test_index_is_the_filters import user_project

    project = user_project(tmp_path / "proj")
    (project / "userproj" / "spiders" / "csvfields.py").write_text(CSV_SPIDER)
    feed = tmp_path / "items.csv"
    with linked_back.serve() as site:
        for run, more in (("1", ["-s", "CLOSESPIDER_ITEMCOUNT=1", "-s", "CONCURRENT_REQUESTS=1"]), ("2", [])):
            r = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "csvfields", "-a",
                                f"start={site.url}/index.html", "-a", f"run={run}", "-o", str(feed),
                                "-s", f"JOBDIR={tmp_path / 'job'}", *more],
                               cwd=project, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            assert "second header row" not in r.stderr
        rows = list(csv.reader(io.StringIO(feed.read_text())))
        assert rows[0] == ["url", "title"] and all(len(row) == 2 for row in rows)
        assert sorted(row[0] for row in rows[1:]) == site.urls()


@pytest.mark.parametrize("how", ["moved", "copied"])
def test_a_jobdir_moved_or_copied_with_its_feeds(tmp_path, how):
    """A killed crawl's directory (its JOBDIR and its feed file) moved or copied elsewhere, and resumed there.
    Moved, the feed was not found at its recorded path: a second document was appended to it (a JSON file
    that no longer parses). Copied, the copy's resume cut and closed the *original's* file, which another
    crawl was still writing (its items lost). Moved, the file is found by its inode and its document goes
    on; copied, the original is left as it is."""
    import shutil

    fmt = "json"
    first = tmp_path / "a"
    run = Run(first / "job", first / "feed.json", fmt)
    run.item("u1", 1)
    run.item("u2", 2)
    run.commit([1])
    run.kill()
    before = (first / "feed.json").read_bytes()
    second = tmp_path / "b"
    (shutil.move if how == "moved" else shutil.copytree)(first, second)
    run = Run(second / "job", second / "feed.json", fmt)
    run.item("u2", 2)
    run.item("u3", 3)
    run.commit([2, 3])
    run.finish()
    if how == "moved":
        assert parse(second / "feed.json", fmt) == ["u1", "u2", "u3"]
    else:
        assert (first / "feed.json").read_bytes() == before  # (the original's, untouched)
