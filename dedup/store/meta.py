"""A store's metadata, and the rules for opening a store under given settings.

A store records what made it (its format, the fingerprints' bits,
``max_distance``, the table layout, the fingerprint scheme and the capacity
it was made for) when it is created, and refuses to open under settings
that would misread it (``StoreMismatchError``). Both stores follow the same
rules: the embedded one over its backend, the Redis one over its metadata
hash.
"""

from __future__ import annotations

from typing import Protocol

from .backends import StoreError
from .layout import FP_BITS, Layout, choose_layout

STORE_FORMAT = "1"


class StoreMismatchError(StoreError):
    """The store was made with other settings than the ones asked for; ``field``: which (``max_distance``,
    ``scheme``, ``layout``, ``format``, ``bits``), for a caller that names its own setting for it."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class MetaHolder(Protocol):
    """Where a store keeps its metadata (a ``Backend``, or the Redis store's hash)."""

    def read_meta(self) -> dict[str, str]: ...

    def write_meta(self, meta: dict[str, str]) -> None: ...


def settle_meta(holder: MetaHolder, k: int, capacity: int, scheme: str | None, layout: Layout | None,
                readonly: bool) -> Layout:
    """The layout of the store ``holder`` keeps the metadata of: written from
    these settings if the store is new (``layout``, or one chosen for ``k``
    and ``capacity``); checked against them if not. Raises ``StoreError``
    (no store to read) or ``StoreMismatchError``."""
    meta = holder.read_meta()
    where = getattr(holder, "path", "memory")
    if not meta.get("format"):
        if readonly:
            raise StoreError(f"no store at {where}")
        lay = layout or choose_layout(k, capacity)
        if lay.k != k:
            raise ValueError(f"layout is for max_distance={lay.k}, asked for {k}")
        holder.write_meta({"format": STORE_FORMAT, "bits": str(FP_BITS), "max_distance": str(k),
                           "layout": lay.to_json(), "scheme": scheme or "", "capacity": str(capacity)})
        return lay
    if meta["format"] != STORE_FORMAT:
        raise StoreMismatchError(f"store at {where} has format {meta['format']}, this version reads {STORE_FORMAT}",
                                 "format")
    if int(meta.get("bits", 64)) != FP_BITS:
        raise StoreMismatchError(f"store at {where} holds {meta['bits']}-bit fingerprints, not {FP_BITS}", "bits")
    if int(meta["max_distance"]) != k:
        raise StoreMismatchError(
            f"store at {where} was made with max_distance={meta['max_distance']}, asked for {k}", "max_distance")
    stored_scheme = meta.get("scheme") or None
    if scheme and stored_scheme and scheme != stored_scheme:
        raise StoreMismatchError(
            f"store at {where} holds fingerprints of scheme {stored_scheme!r}, asked for {scheme!r}; "
            "fingerprints made differently cannot be compared: use another store", "scheme")
    if scheme and not stored_scheme and not readonly:
        holder.write_meta({"scheme": scheme})
    lay = Layout.from_json(meta["layout"])
    if layout is not None and layout != lay:
        raise StoreMismatchError(f"store at {where} uses layout {lay.describe()}, asked for {layout.describe()}",
                                 "layout")
    return lay
