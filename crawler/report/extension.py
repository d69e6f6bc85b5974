"""``NEARDUP_REPORT = "path.html"``: the report written when a crawl closes.

Opt-in: the add-on installs this extension only when ``NEARDUP_REPORT`` is
set. It reads the crawl's own files (the duplicates file, the index, the
rule book, the runs log, the dropped pages' text) once the engine has
stopped, after the filter and the index closed them, so the report holds
every page; it builds the report in a thread, off the reactor. A report that cannot be written is logged as an error; the
crawl's outcome is not changed.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from ..config import ConfigError, NearDupConfig
from ..filter.captured_text import capture_path
from ..filter.runs_log import runs_path
from .sources import Inputs

logger = logging.getLogger(__name__)


def inputs_of(config: NearDupConfig, jobdir: str | None) -> Inputs:
    """The files a crawl under ``config`` writes, as a report's inputs."""
    def local(path: str | None) -> Path | None:
        return Path(path) if path and "://" not in path and Path(path).is_file() else None

    store = local(str(Path(config.store) / "store.sqlite3")) if config.store and not config.shared_store else None
    rules = config.url_rules_file if config.url_rules_file and "://" in config.url_rules_file \
        else local(config.url_rules_file)
    return Inputs("crawl", config.report or "", duplicates=local(config.duplicates_file), index=local(config.index),
                  rules=rules, runs=local(str(runs_path(jobdir))) if jobdir else None, store=store,
                  captured=local(str(capture_path(config.duplicates_file))) if config.duplicates_file else None)


class ReportExtension:
    """Writes the report to ``NEARDUP_REPORT`` when the engine stops."""

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.config = config
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReportExtension:
        config = NearDupConfig.of(crawler)
        if not config.enabled or not config.report:
            raise NotConfigured
        if importlib.util.find_spec("matplotlib") is None:  # (said now, not after the whole crawl)
            from .plots import MISSING

            raise ConfigError(f"NEARDUP_REPORT: {MISSING}")
        return cls(crawler, config)

    async def engine_stopped(self) -> None:
        # (in a thread: another crawl of the same process may still be running on the reactor;
        # Scrapy waits for this before it counts the crawl as done)
        await maybe_deferred_to_future(deferToThread(self._write))

    def _write(self) -> None:
        from . import write_report

        assert self.config.report is not None
        started = time.monotonic()
        inputs = inputs_of(self.config, self.crawler.settings.get("JOBDIR"))
        inputs.where = f"of the spider {self.crawler.spidercls.name!r}" if self.crawler.spidercls else ""
        inputs.stats = self.crawler.stats.get_stats() if self.crawler.stats else None
        try:
            size = write_report(inputs, self.config.report)
        except Exception as exc:  # (a report is for people: the crawl's outcome stands)
            logger.error("could not write the report %s: %s: %s", self.config.report, type(exc).__name__, exc)
            return
        logger.info("report: %s (%d bytes, %.1f s)", self.config.report, size, time.monotonic() - started)
