"""One crawl at a time on a JOBDIR or a store directory; a second one is refused at start.

A running crawl holds two locks: the durable frontier holds
``JOBDIR/frontier.lock`` (``crawler.frontier.db``), the store its directory's
``writer.lock`` (``dedup.store.backends.SQLiteBackend``). The filter looks at
both while Scrapy builds the crawl's components, before the engine exists
(``NearDupMiddleware.from_crawler``): a crawl that finds one held stops
there, with one error, ``CrawlInUse``, that names the directory and its lock
and says what the user can do. Found later, when the engine opens the
scheduler, the same refusal comes inside the engine's failing start (scraper,
stats and signal errors).

What Scrapy does with it: the crawl ends before it began, Scrapy logs the
error once with its traceback (asyncio's "Task exception was never
retrieved", or Twisted's "Unhandled error in Deferred"), and ``scrapy crawl``
exits with 1 (from Scrapy 2.15; 2.14 exits with 0 after any component fails
to start, as its exit code only covers a spider that could not be made).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from scrapy_neardup.dedup.store.backends import WRITER_LOCK

#: The durable frontier's lock in JOBDIR
FRONTIER_LOCK = "frontier.lock"
#: The store's lock in its directory (dedup.store.backends.SQLiteBackend takes it)
STORE_LOCK = WRITER_LOCK
_SHARE = "to share one store between processes, use a redis:// NEARDUP_STORE"


class CrawlInUse(RuntimeError):
    """Another running crawl holds this crawl's JOBDIR or store: this one does not start."""


def jobdir_in_use(jobdir: str | os.PathLike[str]) -> str:
    """What to tell a crawl whose JOBDIR another crawl is using."""
    return (f"another crawl is using JOBDIR {jobdir} (it holds {Path(jobdir) / FRONTIER_LOCK}): wait for it to "
            f"finish, or give this crawl another JOBDIR; {_SHARE}")


def store_in_use(store: str | os.PathLike[str]) -> str:
    """What to tell a crawl whose store directory another crawl is using."""
    return (f"another crawl is using the store {store} (it holds {Path(store) / STORE_LOCK}): wait for it to "
            f"finish, or give this crawl another NEARDUP_STORE (or another JOBDIR, which holds the store unless "
            f"NEARDUP_STORE is set); {_SHARE}")


def held_by_another(lock: Path) -> bool:
    """Whether another process holds ``lock`` (an exclusive ``flock``). Takes it
    for an instant to find out; a lock file that is not there (no crawl made
    it) or cannot be opened is not held: the crawl's own open says why."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def refuse_a_jobdir_in_use(jobdir: str | os.PathLike[str] | None) -> None:
    """Raise ``CrawlInUse`` when a running crawl's durable frontier holds ``jobdir``.

    (A crawl that starts in the same instant as another gets past this check
    and meets the frontier's own lock as the engine opens it: the same words,
    among the engine's errors.)"""
    if jobdir and held_by_another(Path(jobdir) / FRONTIER_LOCK):
        raise CrawlInUse(jobdir_in_use(jobdir))


def store_is_in_use(store: str | os.PathLike[str]) -> bool:
    """Whether a running crawl holds the store directory ``store``."""
    return held_by_another(Path(store) / STORE_LOCK)
