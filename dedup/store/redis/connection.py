"""Reaching a Redis store: connecting to one Redis or a Redis Cluster (as
the server says it is), redis-py's errors turned into the store's, and
``Connection``, through which every part of the store talks to the server:
commands and Lua scripts, pipelined.

redis-py is imported inside the functions: the library imports without the
``[redis]`` extra, and only a ``redis://`` store needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ..backends import StoreError
from .url import redact

R = TypeVar("R")  # what a call returns


class StoreUnavailable(StoreError):
    """The store's server cannot be reached (or is loading): retry later."""


def connect(url: str, *, cluster: bool | None = None, timeout: float = 5.0) -> tuple[Any, bool]:
    """A redis-py client for ``url`` (a Redis Cluster client when the server
    says it is one, or ``cluster`` says so), checked with a PING, and whether
    it is a cluster. Raises ``StoreUnavailable`` naming the URL (no password)."""
    try:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.cluster import RedisCluster
        from redis.retry import Retry
    except ImportError as exc:
        raise StoreError("a redis:// store needs the redis package: pip install 'scrapy-neardup[redis]'") from exc
    # reconnects with backoff, within a call; a longer outage surfaces as StoreUnavailable
    opts = dict(socket_timeout=timeout, socket_connect_timeout=timeout,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3), health_check_interval=30)
    shown = redact(url)
    try:
        if cluster is None:
            probe = redis.Redis.from_url(url, **opts)
            try:
                info = probe.info("cluster")
            finally:
                probe.close()
            cluster = bool(info.get("cluster_enabled"))
        client: Any
        if cluster:
            opts.pop("health_check_interval")
            client = RedisCluster.from_url(url, **opts)
        else:
            client = redis.Redis.from_url(url, **opts)
        client.ping()
    except redis.AuthenticationError as exc:
        raise StoreError(f"the Redis store at {shown} refused the credentials ({exc})") from None
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterError) as exc:
        raise StoreUnavailable(f"cannot reach the Redis store at {shown}: {exc}") from None
    except redis.RedisError as exc:
        raise StoreError(f"the Redis store at {shown} answered with an error: {exc}") from None
    return client, cluster


@contextmanager
def redis_errors(what: str) -> Iterator[None]:
    """Turn redis-py's errors inside the block into ``StoreUnavailable`` (the
    server cannot be reached, is loading, or a cluster is resharding: retry
    later) or ``StoreError`` (anything else), each naming ``what`` (a redacted URL)."""
    import redis

    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterError,
            redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError) as exc:
        raise StoreUnavailable(f"{what} is unavailable: {exc}") from None
    except redis.exceptions.ReadOnlyError as exc:
        raise StoreError(f"{what} cannot be written: {exc}") from None
    except redis.RedisError as exc:
        raise StoreError(f"{what} failed: {exc}") from None


class Connection:
    """One store's client, and its calls: each turns redis-py's errors into
    store errors naming ``location`` (a redacted URL). Script calls go by
    SHA (``EVALSHA``), each script loaded once per connection."""

    def __init__(self, client: Any, location: str) -> None:
        self.client: Any = client  # None once closed
        self.location = location
        self._sha: dict[str, str] = {}

    def call(self, fn: Callable[[Any], R]) -> R:
        """Run ``fn(client)``, turning redis-py's errors into store errors."""
        with redis_errors(f"the Redis store at {self.location}"):
            return fn(self.client)

    def run(self, calls: list[tuple[str, list, list]]) -> list[Any]:
        """Run script calls ``(script, keys, args)`` in one pipeline (redis-py
        sends each to its slot's node); loads the scripts where a server lacks them."""
        import redis

        def go(client: Any) -> list[Any]:
            for _attempt in range(3):
                pipe = client.pipeline(transaction=False)
                for src, keys, args in calls:
                    # (execute_command: redis-py blocks the evalsha method in cluster pipelines, not the command)
                    pipe.execute_command("EVALSHA", self._script(src), len(keys), *keys, *args)
                out = pipe.execute(raise_on_error=False)
                errors = [r for r in out if isinstance(r, Exception)]
                if not errors:
                    return out
                if any(isinstance(e, redis.exceptions.NoScriptError) for e in errors):
                    # a server restarted without its scripts: nothing ran for those calls
                    missing = [c for c, r in zip(calls, out) if isinstance(r, redis.exceptions.NoScriptError)]
                    if len(missing) == len(errors) and len(missing) < len(calls):
                        done = {i for i, r in enumerate(out) if not isinstance(r, Exception)}
                        self._sha.clear()
                        rest = [c for i, c in enumerate(calls) if i not in done]
                        again = self.run(rest)
                        it = iter(again)
                        return [out[i] if i in done else next(it) for i in range(len(calls))]
                    self._sha.clear()
                    continue
                raise errors[0]
            raise StoreError(f"the Redis store at {self.location} keeps losing its scripts")

        return self.call(go)

    def _script(self, src: str) -> str:
        sha = self._sha.get(src)
        if sha is None:
            sha = self._sha[src] = self.client.script_load(src)  # (on every primary of a cluster)
        return sha

    def pipe(self, commands: Sequence[tuple]) -> list[Any]:
        """Run Redis commands (``("MGET", key, ...)``), pipelined (redis-py sends
        each to its slot's node)."""
        if not commands:
            return []

        def go(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return pipe.execute()
        return self.call(go)

    def each(self, command: str, names: Sequence[Any]) -> list[Any]:
        """One command (``"GET"``, ``"HGETALL"``, ``"DEL"``) on each key, pipelined."""
        return self.pipe([(command, name) for name in names])

    def scan(self, pattern: str) -> list[bytes]:
        """Every key matching ``pattern`` (SCAN: on every node of a cluster)."""
        def scan(client: Any) -> list[bytes]:
            return list(client.scan_iter(match=pattern, count=1000))
        return self.call(scan)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
