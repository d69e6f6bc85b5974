"""A kept page's items, filled in with what the filter already extracted.

Items whose ``fingerprint`` field is None get the page's fingerprint (hex),
and their ``title``, ``text`` and ``language`` fields, where None, the
page's: nothing is extracted twice. An item of a page that passed through
unchecked keeps ``fingerprint`` None.
"""

from __future__ import annotations

from typing import Any

from itemadapter import ItemAdapter, is_item
from scrapy import Request

from scrapy_neardup.dedup.fingerprint.jobs import JobResult
from scrapy_neardup.dedup.simhash import to_hex


def fill(output: Any, result: JobResult | str) -> None:
    """Fill in ``output`` (an item; anything else is left alone) from ``result``."""
    # Requests first: they are most of the output, and is_item() is slow on them
    if isinstance(output, Request) or isinstance(result, str) or not is_item(output):
        return
    adapter = ItemAdapter(output)
    if "fingerprint" not in adapter or adapter["fingerprint"] is not None:
        return
    adapter["fingerprint"] = None if result.value is None else to_hex(result.value)
    for name, value in (("title", result.title), ("text", result.text), ("language", result.language)):
        if name in adapter and adapter[name] is None:
            adapter[name] = value
