"""A Redis store's URL: recognising one, parting the store's own query
parameters from redis-py's, and showing it without its password.

``redis://[:password@]host:port/db?prefix=NAME&shards=64&lease=30&cluster=yes``
(or ``rediss://``, ``unix://``): ``OWN_PARAMS`` are the store's, the rest go
to redis-py. Nothing here talks to a server or imports redis-py.

>>> split_url("redis://h:6379/0?prefix=crawl&socket_keepalive=true")
('redis://h:6379/0?socket_keepalive=true', {'prefix': 'crawl'})
>>> redact("redis://:s3cret@h:6379/0")
'redis://***@h:6379/0'
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..backends import StoreError

OWN_PARAMS = ("prefix", "cluster", "shards", "lease")
#: The URL schemes of a Redis store (redis-py's): any other location is a local path
SCHEMES = ("redis", "rediss", "unix")


def is_redis_url(location: str) -> bool:
    return location.startswith(tuple(f"{s}://" for s in SCHEMES))


def redact(url: str) -> str:
    """``url`` without its password (for messages, logs and stats)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL for redis-py, and this store's own query parameters."""
    parts = urlsplit(url)
    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (own.__setitem__(name, value) if name in OWN_PARAMS else rest.append((name, value)))
    return urlunsplit(parts._replace(query=urlencode(rest))), own


def cluster_flag(value: str | None) -> bool | None:
    """``cluster=`` of the URL: True or False, or None (absent: ask the server)."""
    if value is None or value == "":
        return None
    if value.lower() in ("1", "yes", "true", "on"):
        return True
    if value.lower() in ("0", "no", "false", "off"):
        return False
    raise StoreError(f"cluster={value!r} in the store URL: use yes or no")
