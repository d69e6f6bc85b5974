"""The crawl's one way of saying when: UTC, to the second, ISO 8601.

The items' ``fetched_at``, the index's and the duplicates file's ``time``
are written alike, so that they compare and sort as strings.

>>> len(utc_now()), utc_now().endswith("+00:00")
(25, True)
"""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Now, e.g. ``2026-11-25T17:02:36+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
