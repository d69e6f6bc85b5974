"""NearDupConfig: defaults, derived paths, errors that name the setting."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from crawler.addon import MIDDLEWARE, NearDupAddon
from crawler.config import ConfigError, NearDupConfig


def cfg(**values) -> NearDupConfig:
    return NearDupConfig.from_settings(Settings(values))


def test_defaults_in_memory():
    c = cfg()
    assert (c.enabled, c.max_distance, c.store, c.emit_unchanged) == (True, 3, None, False)


def test_jobdir_gives_the_store_and_files_beside_it(tmp_path):
    c = cfg(JOBDIR=str(tmp_path))
    assert c.store == str(tmp_path / "neardup")
    assert c.duplicates_file == str(tmp_path / "neardup" / "duplicates.jsonl")
    assert c.index == str(tmp_path / "neardup" / "index.sqlite3")
    assert cfg(JOBDIR=str(tmp_path), NEARDUP_STORE="/x/y").store == "/x/y"
    assert cfg(NEARDUP_INDEX="").index is None


@pytest.mark.parametrize("name,value,message", [
    ("NEARDUP_MAX_DISTANCE", "x", "NEARDUP_MAX_DISTANCE must be an integer"),
    ("NEARDUP_MAX_DISTANCE", 9, "NEARDUP_MAX_DISTANCE must be 0..8"),
    ("NEARDUP_MIN_TEXT", 0, "NEARDUP_MIN_TEXT must be >= 1"),
    ("NEARDUP_ENABLED", "maybe", "NEARDUP_ENABLED must be a boolean"),
    ("NEARDUP_DEBUG", "maybe", "NEARDUP_DEBUG must be a boolean"),
    ("NEARDUP_STORE", 5, "NEARDUP_STORE must be a path"),
    ("NEARDUP_STORE", "redis://127.0.0.1/0", "NEARDUP_STORE: redis://"),
    ("NEARDUP_WORKERS", -1, "NEARDUP_WORKERS must be 0..64"),
    ("NEARDUP_CAPACITY", "lots", "NEARDUP_CAPACITY must be an integer"),
])
def test_errors_name_the_setting(name, value, message):
    with pytest.raises(ConfigError, match=message):
        cfg(**{name: value})


def test_addon_adds_components_and_project_settings_win():
    s = Settings({"ROBOTSTXT_OBEY": False}, priority="project")
    NearDupAddon().update_settings(s)
    assert s.getdict("SPIDER_MIDDLEWARES")[MIDDLEWARE] == 950
    assert s.getbool("ROBOTSTXT_OBEY") is False
    assert s.getbool("AUTOTHROTTLE_ENABLED") is True
    assert s["USER_AGENT"].startswith("scrapy-neardup/")
