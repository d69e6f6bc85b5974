"""``Match``: a stored record within k bits of a query, as every store answers it."""

from __future__ import annotations

from typing import NamedTuple


class Match(NamedTuple):
    key: str
    fingerprint: int
    distance: int
