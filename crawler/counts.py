"""The crawl's counts: one definition, one stat and one wording each.

The filter counts here, and the summary line (``crawler.summary``) and
``neardup crawl``'s report read the counts here, so that a count means the
same and is said the same way everywhere:

* **pages fetched** (``neardup/fetched``): responses that reached the filter,
  that is the spider. Not robots.txt, redirects, nor the error pages Scrapy
  keeps from the spider (``HttpErrorMiddleware``): those are no pages;
* **kept** (``neardup/kept``): checked against the store, found new, stored
  and let through;
* **dropped as near-duplicates** (``neardup/dropped``): new drops, each
  written to the duplicates file;
* **dropped again** (``neardup/dropped_again``): a URL the duplicates file
  already holds as a near-duplicate of the same page (an earlier run on the
  same store, or before a kill), dropped again and not written again (said
  only when a page was; without a duplicates file every drop is new);
* **unchanged** (``neardup/unchanged``): the same URL again with near-identical
  text (a later run, a re-fetch);
* **passed through unchecked** (``neardup/skipped``; by reason,
  ``neardup/skipped/<reason>``): not fingerprinted (too short, not HTML, too
  large, an error page, ``neardup_skip``...) or, its store unreachable, not checked;
* **kept again after a stop** (``neardup/kept_again``): stored by the run a
  kill stopped (this process's, or, with the shared frontier, another's whose
  requests it took), fetched again and let through again.

Each page fetched gets one verdict and is counted under one of these six
(or, its store's disk failing, under ``neardup/held_for_resume``), unless
its callback raises before it returns any output (a callback that is no
generator): Scrapy then hands the page's output to no spider middleware.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from scrapy.statscollectors import StatsCollector

FETCHED = "neardup/fetched"
KEPT = "neardup/kept"
DROPPED = "neardup/dropped"
UNCHANGED = "neardup/unchanged"
UNCHECKED = "neardup/skipped"
KEPT_AGAIN = "neardup/kept_again"
DROPPED_AGAIN = "neardup/dropped_again"
OUTLINKS_DROPPED = "neardup/outlinks_dropped"
REQUESTS_AVOIDED = "neardup/requests_avoided"
COPIES_CONFIRMED = "neardup/url_rules/range_confirmed"  # (bodies not downloaded: a ranged GET confirmed the copy)
BYTES_DOWNLOADED = "downloader/response_bytes"  # (Scrapy's: every response, robots.txt too)
#: Confirming predicted copies by ranged GETs (``NEARDUP_URL_RULES_CONFIRM_BYTES``): the runs log keeps
#: them per run and the report adds them up (``bytes_saved_estimate`` is an estimate: no body was seen)
RANGED_GET_STATS = (COPIES_CONFIRMED, "neardup/url_rules/ranged_gets", "neardup/url_rules/ranged_bytes",
                    "neardup/url_rules/range_mismatch", "neardup/url_rules/range_whole", "neardup/url_rules/unconfirmable",
                    "neardup/url_rules/bytes_saved_estimate")


def count_unchecked(stats: StatsCollector, reason: str) -> None:
    """A page passed through unchecked, for ``reason`` (``too_short``, ``non_html``...)."""
    stats.inc_value(UNCHECKED)
    stats.inc_value(f"{UNCHECKED}/{reason}")


@dataclass(frozen=True)
class CrawlCounts:
    """A crawl's counts, read from its stats.

    >>> counts = CrawlCounts.from_stats({"neardup/fetched": 22, "neardup/kept": 15, "neardup/dropped": 5,
    ...                                  "neardup/skipped": 2, "downloader/response_bytes": 48668})
    >>> counts.sentence()
    '22 pages fetched, 15 kept, 5 dropped as near-duplicates, 0 unchanged, 2 passed through unchecked, 0 outlinks not requested, 0 requests avoided by learned URL rules, 48668 bytes downloaded'
    """

    fetched: int = 0
    kept: int = 0
    dropped: int = 0
    dropped_again: int = 0
    unchanged: int = 0
    unchecked: int = 0
    kept_again: int = 0
    outlinks_not_requested: int = 0
    requests_avoided: int = 0
    copies_confirmed: int = 0
    bytes_downloaded: int = 0

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> CrawlCounts:
        """From a crawl's stats (``crawler.stats.get_stats()``, or the dump of them)."""
        return cls(**{f.name: int(stats.get(STATS[f.name], 0)) for f in fields(cls)})

    def sentence(self) -> str:
        """The counts in words, as the summary line and ``neardup crawl`` say them
        (kept again and dropped again only when a page was)."""
        return ", ".join(f"{getattr(self, name)} {words}" for name, words in WORDS.items()
                         if name not in SAID_WHEN_NOT_ZERO or getattr(self, name))


#: Each count's stat
STATS = {
    "fetched": FETCHED, "kept": KEPT, "dropped": DROPPED, "dropped_again": DROPPED_AGAIN, "unchanged": UNCHANGED,
    "unchecked": UNCHECKED,
    "kept_again": KEPT_AGAIN, "outlinks_not_requested": OUTLINKS_DROPPED, "requests_avoided": REQUESTS_AVOIDED,
    "copies_confirmed": COPIES_CONFIRMED, "bytes_downloaded": BYTES_DOWNLOADED,
}
#: Each count's words, in the order they are said
WORDS = {
    "fetched": "pages fetched", "kept": "kept", "dropped": "dropped as near-duplicates",
    "dropped_again": "dropped again as known near-duplicates", "unchanged": "unchanged",
    "unchecked": "passed through unchecked", "kept_again": "kept again after a stop",
    "outlinks_not_requested": "outlinks not requested",
    "requests_avoided": "requests avoided by learned URL rules",
    "copies_confirmed": "copies confirmed by ranged GETs (bodies not downloaded)", "bytes_downloaded": "bytes downloaded",
}
#: The counts said only when not zero (most crawls have none)
SAID_WHEN_NOT_ZERO = frozenset({"kept_again", "dropped_again", "copies_confirmed"})
