"""The add-on's switches (``NEARDUP_ENABLED``, ``NEARDUP_URL_RULES``), read before
anything else of the filter is imported.

A project may keep the add-on in ``ADDONS`` and switch the filter off: its crawl
must then be plain Scrapy's, without the library (numpy, numba and the compiled
kernels: about 1,500 modules and 50,000 objects that every full collection of
Python's garbage collector would walk). So this module imports nothing of the
filter; ``config`` re-exports what it defines.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings


class ConfigError(ValueError):
    """A NEARDUP_* setting has a bad value; the message names it."""


def setting_bool(settings: BaseSettings, name: str, default: bool) -> bool:
    """A boolean setting (True/False, 1/0, "true"/"false" in any case), or
    ``ConfigError`` naming it: for whoever reads a NEARDUP_* switch before
    ``NearDupConfig`` is made (the add-on).

    >>> from scrapy.settings import Settings
    >>> setting_bool(Settings({"NEARDUP_ENABLED": "false"}), "NEARDUP_ENABLED", True)
    False
    """
    raw = settings.get(name, default)
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0"):
        return raw.strip().lower() in ("true", "1")
    # (Scrapy's getbool takes 2 for True and raises TypeError on a list: neither names the setting)
    raise ConfigError(f"{name} must be a boolean (True/False/1/0), got {raw!r}")
