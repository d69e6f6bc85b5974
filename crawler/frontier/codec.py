"""Requests to JSON and back, for the durable frontier: no pickle, nothing evaluated.

A request becomes Scrapy's own ``Request.to_dict()`` (callbacks by name)
written as JSON. Values JSON has no type for are tagged: bytes as
``{"$b": base64}``, tuples as ``{"$t": [...]}``, dicts whose keys are not all
plain strings as ``{"$d": [[key, value], ...]}``. Anything else (a meta value
that is an arbitrary object) cannot be stored: ``UnserializableRequest``
names the field, as Scrapy's disk queues refuse what pickle cannot store.

>>> from scrapy import Request
>>> r = decode_request(encode_request(Request("http://a.test/", body=b"x", meta={"depth": 2, "t": (1, 2)})))
>>> r.url, r.body, r.meta["depth"], r.meta["t"]
('http://a.test/', b'x', 2, (1, 2))

Reading back never imports a module the crawl has not imported: a request
subclass is restored only if its module is already loaded (a frontier file
someone else wrote cannot make the crawler import code).
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.misc import load_object
from scrapy.utils.request import request_from_dict


class UnserializableRequest(ValueError):
    """A request holds a value the frontier cannot store as JSON; the message names where."""


class CorruptRequest(ValueError):
    """A stored request could not be read back."""


_PLAIN = (str, int, float, bool, type(None))
_DEFAULTS = {k: v for k, v in Request("http://a.test/").to_dict().items() if k != "url"}


def _enc(value: Any, where: str) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_enc(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"$t": [_enc(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _enc(v, f"{where}[{k!r}]") for k, v in value.items()}
        return {"$d": [[_enc(k, f"{where} key"), _enc(v, f"{where}[{k!r}]")] for k, v in value.items()]}
    raise UnserializableRequest(f"{where} is a {type(value).__name__}, which the frontier cannot store as JSON")


def _dec(value: Any) -> Any:
    if isinstance(value, list):
        return [_dec(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (tag, inner), = value.items()
            if tag == "$b":
                return base64.b64decode(inner)
            if tag == "$t":
                return tuple(_dec(v) for v in inner)
            if tag == "$d":
                return {_dec_key(k): _dec(v) for k, v in inner}
        return {k: _dec(v) for k, v in value.items()}
    return value


def _dec_key(key: Any) -> Any:
    key = _dec(key)
    return tuple(key) if isinstance(key, list) else key  # (dict keys must be hashable)


def encode_request(request: Request, spider: Spider | None = None) -> str:
    """JSON text of ``request``; ``UnserializableRequest`` if it cannot be stored.
    A callback must be a method of ``spider`` (found by name on the way back)."""
    try:
        d = request.to_dict(spider=spider)
    except ValueError as exc:  # a callback that is no method of the spider
        raise UnserializableRequest(str(exc)) from None
    # what a new Request has anyway is left out: a million queued requests take a third of the space
    d = {k: v for k, v in d.items() if k not in _DEFAULTS or _DEFAULTS[k] != v or type(_DEFAULTS[k]) is not type(v)}
    return json.dumps(_enc(d, "request"), ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def decode_request(data: str, spider: Spider | None = None) -> Request:
    """The request ``encode_request`` stored; ``CorruptRequest`` if it cannot be read back."""
    try:
        d = _dec(json.loads(data))
        if not isinstance(d, dict) or "url" not in d:
            raise ValueError("not a stored request")
        cls_path = d.get("_class")
        if cls_path is not None:
            module = str(cls_path).rpartition(".")[0]
            if module not in sys.modules:
                raise ValueError(f"request class {cls_path!r} is from a module this crawl has not imported")
            if not (isinstance(cls := load_object(cls_path), type) and issubclass(cls, Request)):
                raise ValueError(f"{cls_path!r} is not a Request class")
        return request_from_dict(d, spider=spider)
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRequest(f"a stored request could not be read back: {exc}") from None
