"""Every ``NEARDUP_*`` setting, parsed once into a validated ``NearDupConfig``.

``NearDupConfig.of(crawler)`` parses a crawler's settings on the first call
and hands every later caller (the middleware, the pipeline, the extension,
the spider) the same object. A bad value stops the crawl at start with a
message naming the setting.
"""

from __future__ import annotations

import json
import math
import os
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from scrapy_neardup.dedup.fingerprint import DEFAULT_MIN_TOKENS
from scrapy_neardup.dedup.store.layout import MAX_DISTANCE
from scrapy_neardup.dedup.store.redis import is_redis_url, redact
from scrapy_neardup.dedup.store.redis.url import SCHEMES as STORE_SCHEMES  # (a shared rule book too)

from .switches import ConfigError as ConfigError, setting_bool as setting_bool  # (read by the add-on first)


SCOPES = ("all", "host", "domain")
UNAVAILABLE = ("pause", "pass")


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(value: str) -> str | None:
    r"""The scheme of ``value`` if it is written as a URL (``scheme://...``), else None.

    >>> url_scheme("http://example.com/"), url_scheme("out/store"), url_scheme(r"C:\crawl")
    ('http', None, None)
    """
    match = _URL.match(value)
    return match.group(1).lower() if match else None


#: The least ``NEARDUP_WORKER_MEMORY`` a worker can start under (its warm-up compiles kernels: ~800 MiB of
#: address space at the peak, below which it never starts); the documentation advises 1,200.
MIN_WORKER_MEMORY = 800


@dataclass(frozen=True)
class NearDupConfig:
    enabled: bool = True
    max_distance: int = 3
    store: str | None = None  # directory path, redis:// URL, or None for an in-memory store
    capacity: int = 1_000_000
    duplicates_file: str | None = None  # JSON lines explaining each drop
    min_text: int = DEFAULT_MIN_TOKENS
    debug: bool = False
    emit_unchanged: bool = False
    index: str | None = None  # SQLite FTS5 index of kept pages
    skip_meta_key: str = "neardup_skip"
    workers: int = 0  # fingerprinting processes; 0: in the crawl's thread
    worker_timeout: float = 10.0  # seconds a worker may take over one page (then neardup/skipped/timeout)
    worker_memory: int = 0  # MiB of address space a worker may use (RLIMIT_AS); 0: no limit
    withhold_hostile: bool = False  # keep pages the pre-parse scan marks hostile from the spider's callbacks
    check_error_pages: bool = False  # fingerprint 4xx/5xx bodies too
    frontier: bool = True  # the durable frontier whenever JOBDIR is set
    frontier_max_redeliveries: int = 3  # a request in flight at that many kills in a row is given up
    max_page_bytes: int = 10 * 1024 * 1024  # larger pages pass unchecked (neardup/skipped/too_large)
    scope: str = "all"  # compare a page with pages of: "all" sites, its "host", its registered "domain"
    # a shared (Redis) store that cannot be reached: "pause" the pages until it is back,
    # or let them "pass" unchecked and unstored (neardup/skipped/store_unavailable)
    store_unavailable: str = "pause"
    frontier_lease: float = 30.0  # shared frontier: a process silent this long is dead (its requests requeued)
    url_rules: bool = True  # learn which URLs lead to duplicates and stop requesting them
    url_rules_file: str | None = None  # the rule book: a SQLite file, a redis:// URL, or None (in memory)
    url_rules_min_evidence: int = 10  # agreeing pairs (and no counter-example) before a rule acts
    url_rules_explore: float = 0.05  # share of avoidable requests made all the same, to keep testing the rules
    url_rules_pin: tuple[str, ...] = ()  # rule lines that always act
    url_rules_forbid: tuple[str, ...] = ()  # rule lines never learned
    url_rules_confirm_bytes: int = 256  # >0: a sub-tree rule's predicted copy is confirmed by a ranged GET of this many bytes; 0: no sub-tree rules
    dropped_text_bytes: int = 0  # keep dropped pages' text for the report, up to this many bytes (0: off)
    report: str | None = None  # write the HTML report here when the crawl closes (``crawler.report``)
    canonical_first: bool = False  # request a kept page's declared canonical URL (same host) ahead

    @property
    def store_shown(self) -> str:
        """The store for logs and stats: a URL without its password."""
        return redact(self.store) if self.store else "in memory"

    @property
    def shared_store(self) -> bool:
        return self.store is not None and is_redis_url(self.store)

    @classmethod
    def of(cls, crawler: Crawler) -> NearDupConfig:
        """The config of ``crawler``, parsed from its settings once."""
        config = _BY_CRAWLER.get(crawler)
        if config is None:
            config = cls.from_settings(crawler.settings)
            # (a spider is made before the add-ons set their settings: cache only the final ones)
            if crawler.settings.frozen:
                _BY_CRAWLER[crawler] = config
        return config

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> NearDupConfig:
        def boolean(name: str, default: bool) -> bool:
            return setting_bool(settings, name, default)

        def integer(name: str, default: int, lo: int, hi: int | None = None) -> int:
            raw = settings.get(name, default)
            try:
                if isinstance(raw, bool):  # (an int to Python: True would be k = 1)
                    raise ValueError
                value = int(raw)
                if isinstance(raw, float) and raw != value:
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
            if value < lo or (hi is not None and value > hi):
                rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise ConfigError(f"{name} must be {rng}, got {value}")
            return value

        def worker_memory(mib: int) -> int:
            if 0 < mib < MIN_WORKER_MEMORY:  # (a worker could not even start: a traceback, then a warning)
                raise ConfigError(f"NEARDUP_WORKER_MEMORY must be 0 (no cap) or at least {MIN_WORKER_MEMORY} MiB "
                                  f"(a worker's start peaks near 800 MiB of address space), got {mib}")
            return mib

        def number(name: str, default: float, kind: str, bounds: str, ok) -> float:
            raw = settings.get(name, default)
            try:
                if isinstance(raw, bool):
                    raise ValueError
                value = float(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"{name} must be {kind}, got {raw!r}") from None
            if not math.isfinite(value):  # ("inf" seconds: no timeout the code can wait on)
                raise ConfigError(f"{name} must be a finite number, got {raw!r}")
            if not ok(value):
                raise ConfigError(f"{name} must be {bounds}, got {raw!r}")
            return value

        def seconds(name: str, default: float) -> float:
            return number(name, default, "a number of seconds", "> 0", lambda v: v > 0)

        def share(name: str, default: float) -> float:
            return number(name, default, "a number from 0 to 1", "from 0 to 1", lambda v: 0 <= v <= 1)

        def path(name: str, schemes: tuple[str, ...] = ()) -> str | None:
            """A local path, or a URL of one of ``schemes``; any other URL is refused
            (else ``http://host/`` would be taken for the directory ``http:/host/``)."""
            raw = settings.get(name)
            if raw is None or raw == "":
                return None
            if not isinstance(raw, (str, os.PathLike)):
                raise ConfigError(f"{name} must be a path, got {raw!r}")
            value = os.fspath(raw)
            scheme = url_scheme(value)
            if scheme is not None and scheme not in schemes:
                urls = [s + "://" for s in schemes]
                takes = "a local path" + (f" or a {', '.join(urls[:-1])} or {urls[-1]} URL" if urls else "")
                raise ConfigError(f"{name} takes {takes}; {scheme}:// is not one of them (got {value!r})")
            return value

        def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
            raw = settings.get(name, default)
            if raw not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {raw!r}")
            return raw

        store = path("NEARDUP_STORE", STORE_SCHEMES)
        jobdir = settings.get("JOBDIR")
        if store is None and jobdir:
            store = str(Path(jobdir) / "neardup")
        if store and is_redis_url(store):
            # shared by many processes: this crawl's own files go to its JOBDIR, if any
            base = Path(jobdir) / "neardup" if jobdir else None
        else:
            base = Path(store) if store else None

        def output(name: str, filename: str) -> str | None:
            # Set by the user: that path ("" or None: off). Else beside a persistent
            # store, and nothing at all for an in-memory one: the filter writes no
            # file the user did not ask for.
            if name in settings:
                return path(name, STORE_SCHEMES if name == "NEARDUP_URL_RULES_FILE" else ())
            return str(base / filename) if base else None

        def rule_lines(name: str) -> tuple[str, ...]:
            from .url_rules.rules import RuleSyntaxError, UrlRule

            raw = settings.get(name) or ()
            if isinstance(raw, str):  # (the command line: a JSON list, or lines separated by ";")
                try:
                    raw = json.loads(raw) if raw.lstrip().startswith("[") else raw.split(";")
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{name} must be a list of rule lines, got {raw!r} ({exc})") from None
            if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
                raise ConfigError(f"{name} must be a list of rule lines, got {raw!r}")
            lines = tuple(x.strip() for x in raw if x.strip())
            for line in lines:
                try:
                    UrlRule.parse(line)
                except RuleSyntaxError as exc:
                    raise ConfigError(f"{name}: {exc}") from None
            return lines

        duplicates_file = output("NEARDUP_DUPLICATES_FILE", "duplicates.jsonl")
        dropped_text_bytes = integer("NEARDUP_DROPPED_TEXT_BYTES", 0, 0)
        if dropped_text_bytes and not duplicates_file:
            raise ConfigError("NEARDUP_DROPPED_TEXT_BYTES keeps the text beside the duplicates file, and this crawl "
                              "has none: set JOBDIR, NEARDUP_STORE or NEARDUP_DUPLICATES_FILE")
        return cls(
            enabled=boolean("NEARDUP_ENABLED", True),
            max_distance=integer("NEARDUP_MAX_DISTANCE", 3, 0, MAX_DISTANCE),
            store=store,
            capacity=integer("NEARDUP_CAPACITY", 1_000_000, 1),
            duplicates_file=duplicates_file,
            min_text=integer("NEARDUP_MIN_TEXT", DEFAULT_MIN_TOKENS, 1),
            debug=boolean("NEARDUP_DEBUG", False),
            emit_unchanged=boolean("NEARDUP_EMIT_UNCHANGED", False),
            index=output("NEARDUP_INDEX", "index.sqlite3"),
            # one worker process by default where there is a second core for it
            workers=integer("NEARDUP_WORKERS", 1 if (os.cpu_count() or 1) >= 2 else 0, 0, 64),
            worker_timeout=seconds("NEARDUP_WORKER_TIMEOUT", 10.0),
            worker_memory=worker_memory(integer("NEARDUP_WORKER_MEMORY", 0, 0)),
            withhold_hostile=boolean("NEARDUP_WITHHOLD_HOSTILE", False),
            check_error_pages=boolean("NEARDUP_CHECK_ERROR_PAGES", False),
            frontier=boolean("NEARDUP_FRONTIER", True),
            frontier_max_redeliveries=integer("NEARDUP_FRONTIER_MAX_REDELIVERIES", 3, 0),
            scope=choice("NEARDUP_SCOPE", "all", SCOPES),
            max_page_bytes=integer("NEARDUP_MAX_PAGE_BYTES", 10 * 1024 * 1024, 1),
            store_unavailable=choice("NEARDUP_STORE_UNAVAILABLE", "pause", UNAVAILABLE),
            frontier_lease=seconds("NEARDUP_FRONTIER_LEASE", 30.0),
            url_rules=boolean("NEARDUP_URL_RULES", True),
            # with a shared store, the rules are shared beside it (on its Redis, under its prefix)
            url_rules_file=store if "NEARDUP_URL_RULES_FILE" not in settings and store and is_redis_url(store)
            else output("NEARDUP_URL_RULES_FILE", "url_rules.sqlite3"),
            url_rules_min_evidence=integer("NEARDUP_URL_RULES_MIN_EVIDENCE", 10, 1),
            url_rules_explore=share("NEARDUP_URL_RULES_EXPLORE", 0.05),
            url_rules_pin=rule_lines("NEARDUP_URL_RULES_PIN"),
            url_rules_forbid=rule_lines("NEARDUP_URL_RULES_FORBID"),
            url_rules_confirm_bytes=integer("NEARDUP_URL_RULES_CONFIRM_BYTES", 256, 0),
            dropped_text_bytes=dropped_text_bytes,
            report=path("NEARDUP_REPORT"),
            canonical_first=boolean("NEARDUP_CANONICAL_FIRST", False),
        )


_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, NearDupConfig] = weakref.WeakKeyDictionary()
