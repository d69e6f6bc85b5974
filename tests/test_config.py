"""NearDupConfig: defaults, derived paths, errors that name the setting."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scrapy.settings import BaseSettings, Settings
from scrapy.utils.misc import load_object

from scrapy_neardup.crawler.addon import (ACK_DOWNLOADER_MIDDLEWARE, AVOID_MIDDLEWARE, ACK_SPIDER_MIDDLEWARE, DUPEFILTER, EXTENSION, MIDDLEWARE, PIPELINE,
                           SCHEDULER, NearDupAddon, PoliteCrawlAddon)
from scrapy_neardup.crawler.config import ConfigError, NearDupConfig


def cfg(**values) -> NearDupConfig:
    return NearDupConfig.from_settings(Settings(values))


def test_url_rules_sit_beside_the_store():
    assert cfg().url_rules_file is None
    assert cfg(NEARDUP_STORE="/s").url_rules_file == "/s/url_rules.sqlite3"
    shared = "redis://127.0.0.1:6379/0?prefix=crawl"
    assert cfg(NEARDUP_STORE=shared, JOBDIR="/j").url_rules_file == shared
    assert cfg(NEARDUP_STORE=shared, NEARDUP_URL_RULES_FILE="/r.sqlite3").url_rules_file == "/r.sqlite3"


def test_rule_lines_from_settings_or_the_command_line():
    lines = ("param * sid,utm_source", "suffix h /index.html /")
    assert cfg(NEARDUP_URL_RULES_PIN=list(lines)).url_rules_pin == lines
    assert cfg(NEARDUP_URL_RULES_PIN='["param * sid,utm_source", "suffix h /index.html /"]').url_rules_pin == lines
    assert cfg(NEARDUP_URL_RULES_FORBID="param * sid,utm_source; suffix h /index.html /").url_rules_forbid == lines


def test_defaults_in_memory_write_no_file():
    c = cfg()
    assert (c.enabled, c.max_distance, c.store, c.emit_unchanged) == (True, 3, None, False)
    assert (c.duplicates_file, c.index) == (None, None)


def test_named_paths_are_written_without_a_store(tmp_path):
    c = cfg(NEARDUP_INDEX=str(tmp_path / "i.sqlite3"), NEARDUP_DUPLICATES_FILE=str(tmp_path / "d.jsonl"))
    assert (c.index, c.duplicates_file) == (str(tmp_path / "i.sqlite3"), str(tmp_path / "d.jsonl"))


def test_jobdir_gives_the_store_and_files_beside_it(tmp_path):
    c = cfg(JOBDIR=str(tmp_path))
    assert c.store == str(tmp_path / "neardup")
    assert c.duplicates_file == str(tmp_path / "neardup" / "duplicates.jsonl")
    assert c.index == str(tmp_path / "neardup" / "index.sqlite3")
    assert cfg(JOBDIR=str(tmp_path), NEARDUP_STORE="/x/y").store == "/x/y"
    assert cfg(NEARDUP_INDEX="").index is None


@pytest.mark.parametrize("name,value,message", [
    ("NEARDUP_MAX_DISTANCE", "x", "NEARDUP_MAX_DISTANCE must be an integer"),
    ("NEARDUP_WORKER_MEMORY", 100, "NEARDUP_WORKER_MEMORY must be 0 .no cap. or at least 800 MiB"),
    ("NEARDUP_MAX_DISTANCE", 9, "NEARDUP_MAX_DISTANCE must be 0..8"),
    ("NEARDUP_MIN_TEXT", 0, "NEARDUP_MIN_TEXT must be >= 1"),
    ("NEARDUP_ENABLED", "maybe", "NEARDUP_ENABLED must be a boolean"),
    ("NEARDUP_DEBUG", "maybe", "NEARDUP_DEBUG must be a boolean"),
    ("NEARDUP_STORE", 5, "NEARDUP_STORE must be a path"),
    ("NEARDUP_STORE_UNAVAILABLE", "wait", "NEARDUP_STORE_UNAVAILABLE must be one of 'pause', 'pass'"),
    ("NEARDUP_FRONTIER_LEASE", 0, "NEARDUP_FRONTIER_LEASE must be > 0"),
    ("NEARDUP_FRONTIER_LEASE", "soon", "NEARDUP_FRONTIER_LEASE must be a number of seconds"),
    ("NEARDUP_WORKERS", -1, "NEARDUP_WORKERS must be 0..64"),
    ("NEARDUP_CAPACITY", "lots", "NEARDUP_CAPACITY must be an integer"),
    ("NEARDUP_MAX_PAGE_BYTES", 0, "NEARDUP_MAX_PAGE_BYTES must be >= 1"),
    ("NEARDUP_SCOPE", "site", "NEARDUP_SCOPE must be one of 'all', 'host', 'domain'"),
    ("NEARDUP_FRONTIER", "maybe", "NEARDUP_FRONTIER must be a boolean"),
    ("NEARDUP_FRONTIER_MAX_REDELIVERIES", -1, "NEARDUP_FRONTIER_MAX_REDELIVERIES must be >= 0"),
    ("NEARDUP_URL_RULES", "maybe", "NEARDUP_URL_RULES must be a boolean"),
    ("NEARDUP_URL_RULES_EXPLORE", 1.5, "NEARDUP_URL_RULES_EXPLORE must be from 0 to 1"),
    ("NEARDUP_URL_RULES_MIN_EVIDENCE", 0, "NEARDUP_URL_RULES_MIN_EVIDENCE must be >= 1"),
    ("NEARDUP_URL_RULES_PIN", ["param h"], "NEARDUP_URL_RULES_PIN: 'param h': write param HOST NAME"),
    ("NEARDUP_URL_RULES_FORBID", "[not json", "NEARDUP_URL_RULES_FORBID must be a list of rule lines"),
    ("NEARDUP_URL_RULES_FORBID", 7, "NEARDUP_URL_RULES_FORBID must be a list of rule lines"),
    ("NEARDUP_EMIT_UNCHANGED", "maybe", "NEARDUP_EMIT_UNCHANGED must be a boolean"),
    ("NEARDUP_CHECK_ERROR_PAGES", "maybe", "NEARDUP_CHECK_ERROR_PAGES must be a boolean"),
    # a URL the store does not know is refused, not taken for a directory "http:/example.com/"
    ("NEARDUP_STORE", "http://example.com/",
     r"NEARDUP_STORE takes a local path or a redis://, rediss:// or unix:// URL; http:// is not one of them"),
    ("NEARDUP_STORE", "file:///tmp/store", "NEARDUP_STORE takes a local path or a redis://.*; file:// is not"),
    ("NEARDUP_URL_RULES_FILE", "ftp://h/rules", "NEARDUP_URL_RULES_FILE takes a local path or a redis://"),
    ("NEARDUP_INDEX", "https://h/index", "NEARDUP_INDEX takes a local path; https:// is not one of them"),
    ("NEARDUP_DUPLICATES_FILE", "s3://bucket/d.jsonl", "NEARDUP_DUPLICATES_FILE takes a local path; s3://"),
    # Python's booleans are ints, Scrapy's getbool takes 2 for True and raises TypeError on a list,
    # and float("inf") is a number: none of them may pass unnamed
    ("NEARDUP_MAX_DISTANCE", True, "NEARDUP_MAX_DISTANCE must be an integer, got True"),
    ("NEARDUP_WORKER_TIMEOUT", True, "NEARDUP_WORKER_TIMEOUT must be a number of seconds, got True"),
    ("NEARDUP_ENABLED", 2, r"NEARDUP_ENABLED must be a boolean \(True/False/1/0\), got 2"),
    ("NEARDUP_ENABLED", "2", "NEARDUP_ENABLED must be a boolean"),
    ("NEARDUP_ENABLED", [1], r"NEARDUP_ENABLED must be a boolean \(True/False/1/0\), got \[1\]"),
    ("NEARDUP_WORKER_TIMEOUT", "inf", "NEARDUP_WORKER_TIMEOUT must be a finite number, got 'inf'"),
    ("NEARDUP_WORKER_TIMEOUT", float("nan"), "NEARDUP_WORKER_TIMEOUT must be a finite number"),
    ("NEARDUP_CAPACITY", float("inf"), "NEARDUP_CAPACITY must be an integer"),
])
def test_errors_name_the_setting(name, value, message):
    with pytest.raises(ConfigError, match=message):
        cfg(**{name: value})


@pytest.mark.parametrize("store", ["redis://127.0.0.1:6379/0", "rediss://h:6380/1", "unix:///run/redis.sock",
                                   "out/store", "/abs/store", "C:\\crawl\\store"])
def test_a_store_is_a_path_or_a_redis_url(store):
    assert cfg(NEARDUP_STORE=store).store == store


@pytest.mark.parametrize("name", ["NEARDUP_ENABLED", "NEARDUP_URL_RULES", "NEARDUP_FRONTIER"])
def test_the_addon_names_a_bad_switch_too(name):
    """The add-on reads these switches before NearDupConfig is made: a bad value
    is the same error that names the setting, not Scrapy's generic one."""
    with pytest.raises(ConfigError, match=f"{name} must be a boolean"):
        NearDupAddon().update_settings(Settings({name: "maybe", "JOBDIR": "/tmp/j"}))


def _values(s: Settings) -> dict:
    return {k: a.value.copy_to_dict() if isinstance(a.value, BaseSettings) else a.value
            for k, a in s.attributes.items()}


def _changed(before: Settings, after: Settings) -> set[str]:
    b, a = _values(before), _values(after)
    return {name for name in set(b) | set(a) if b.get(name) != a.get(name)}


def test_addon_adds_its_components_and_nothing_else():
    before, s = Settings(), Settings()
    NearDupAddon().update_settings(s)
    assert _changed(before, s) == {"SPIDER_MIDDLEWARES", "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS"}
    assert s.getdict("SPIDER_MIDDLEWARES")[load_object(MIDDLEWARE)] == 950
    assert s.getdict("DOWNLOADER_MIDDLEWARES") == {load_object(AVOID_MIDDLEWARE): 50}
    assert load_object(PIPELINE) in s.getdict("ITEM_PIPELINES") and load_object(EXTENSION) in s.getdict("EXTENSIONS")
    assert s["USER_AGENT"] == before["USER_AGENT"]


def test_addon_with_jobdir_installs_the_durable_frontier_unless_told_otherwise():
    s = Settings({"JOBDIR": "/tmp/j"})
    NearDupAddon().update_settings(s)
    assert s["SCHEDULER"] == SCHEDULER and s["DUPEFILTER_CLASS"] == DUPEFILTER
    assert load_object(ACK_SPIDER_MIDDLEWARE) in s.getdict("SPIDER_MIDDLEWARES")
    assert load_object(ACK_DOWNLOADER_MIDDLEWARE) in s.getdict("DOWNLOADER_MIDDLEWARES")
    # the project's own scheduler (scrapy-redis, say) wins; so does NEARDUP_FRONTIER=False
    s = Settings({"JOBDIR": "/tmp/j", "SCHEDULER": "scrapy_redis.scheduler.Scheduler"}, priority="project")
    NearDupAddon().update_settings(s)
    assert s["SCHEDULER"] == "scrapy_redis.scheduler.Scheduler" and load_object(ACK_SPIDER_MIDDLEWARE) not in s.getdict(
        "SPIDER_MIDDLEWARES")
    before = Settings({"JOBDIR": "/tmp/j", "NEARDUP_FRONTIER": False, "NEARDUP_URL_RULES": False})
    s = Settings({"JOBDIR": "/tmp/j", "NEARDUP_FRONTIER": False, "NEARDUP_URL_RULES": False})
    NearDupAddon().update_settings(s)
    assert _changed(before, s) == {"SPIDER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS"}


def test_a_redis_store_url_is_shown_without_its_password():
    c = cfg(NEARDUP_STORE="redis://:s3cret@127.0.0.1:6379/0?prefix=x", JOBDIR="/tmp/j")
    assert c.shared_store and "s3cret" not in c.store_shown and c.store_shown.startswith("redis://***@127.0.0.1")
    assert c.index == "/tmp/j/neardup/index.sqlite3"  # the crawl's own files go to its JOBDIR
    assert cfg(NEARDUP_STORE="redis://127.0.0.1/0").index is None


def test_shared_profile_sets_the_scrapy_redis_frontier_and_the_store_on_the_same_redis():
    from scrapy_neardup.crawler.addon import REDIS_SCHEDULER, SharedCrawlAddon

    s = Settings({"REDIS_URL": "redis://10.0.0.5:6379/2"}, priority="project")
    SharedCrawlAddon().update_settings(s)
    assert s["SCHEDULER"] == REDIS_SCHEDULER and s.getbool("SCHEDULER_PERSIST")
    assert s["DUPEFILTER_CLASS"] == "scrapy_redis.dupefilter.RFPDupeFilter"
    assert s["NEARDUP_STORE"] == "redis://10.0.0.5:6379/2?prefix=neardup"
    assert load_object(ACK_SPIDER_MIDDLEWARE) in s.getdict("SPIDER_MIDDLEWARES")
    s = Settings({"NEARDUP_STORE": "redis://other:1/0", "SCHEDULER_PERSIST": False}, priority="project")
    SharedCrawlAddon().update_settings(s)  # what the project set wins
    assert s["NEARDUP_STORE"] == "redis://other:1/0" and not s.getbool("SCHEDULER_PERSIST")


def test_an_order_the_project_gave_a_component_wins_over_the_add_on():
    s = Settings({"SPIDER_MIDDLEWARES": {MIDDLEWARE: 123}, "DOWNLOADER_MIDDLEWARES": {AVOID_MIDDLEWARE: None}},
                 priority="project")
    NearDupAddon().update_settings(s)
    assert s.getdict("SPIDER_MIDDLEWARES") == {MIDDLEWARE: 123}  # by path, not added a second time by class
    assert s.getdict("DOWNLOADER_MIDDLEWARES") == {AVOID_MIDDLEWARE: None}  # switched off stays off


def test_addon_switched_off_changes_nothing():
    before, s = Settings({"NEARDUP_ENABLED": False}), Settings({"NEARDUP_ENABLED": False})
    NearDupAddon().update_settings(s)
    assert _changed(before, s) == set()


def test_addon_switched_off_loads_no_library():
    """A project that keeps the add-on and switches the filter off runs plain Scrapy:
    neither the library nor numba is imported (each full garbage collection would walk
    their objects, on every crawl of that project)."""
    code = ("import sys\n"
            "from scrapy.settings import Settings\n"
            "from scrapy_neardup import NearDupAddon, PoliteCrawlAddon\n"
            "s = Settings({'NEARDUP_ENABLED': False})\n"
            "NearDupAddon().update_settings(s)\n"
            "PoliteCrawlAddon().update_settings(s)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy', 'llvmlite')\n"
            "             or m.startswith('scrapy_neardup.dedup')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout[:2000]


def test_polite_profile_is_opt_in_and_project_settings_win():
    s = Settings({"ROBOTSTXT_OBEY": False}, priority="project")
    PoliteCrawlAddon().update_settings(s)
    assert s.getbool("ROBOTSTXT_OBEY") is False
    assert s.getbool("AUTOTHROTTLE_ENABLED") is True
    assert s.getint("DEPTH_PRIORITY") == 1
