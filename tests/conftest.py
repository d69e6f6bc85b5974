"""Shared fixtures: paths to ../shared/data (skip when absent), free ports."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with the reason."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not present: {p} (a fresh clone has no ../shared)")
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- real Redis servers (tests/fixtures/redis_servers.py) -------------------------


def _redis(kind: str):
    """Start ``tests.fixtures.redis_servers.<kind>`` (or skip saying why it cannot run), yield it, stop it."""
    from tests.fixtures import redis_servers

    if (why := redis_servers.available()) is not None:
        pytest.skip(why)
    server = getattr(redis_servers, kind)()
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_server():
    """One redis-server on a free loopback port, for the session."""
    yield from _redis("RedisServer")


@pytest.fixture(scope="session")
def redis_cluster():
    """A 3-node Redis Cluster on loopback ports, for the session."""
    yield from _redis("RedisCluster")


_prefixes = iter(range(10**9))


@pytest.fixture
def redis_url(redis_server, request):
    """A store URL on the session's redis-server with a prefix of its own."""
    return f"{redis_server.url}?prefix=t{next(_prefixes)}"


@pytest.fixture
def redis_cluster_url(redis_cluster):
    """A store URL on the session's Redis Cluster with a prefix of its own."""
    return f"{redis_cluster.url}?prefix=c{next(_prefixes)}"


@pytest.fixture(params=["redis", "cluster"])
def shared_store_url(request):
    """A store URL with a prefix of its own, on one Redis and on a Redis Cluster."""
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


# -- one name for every module -------------------------------------------------------


def pytest_sessionfinish(session, exitstatus):
    """The repository's folders ``crawler/`` and ``dedup/`` are importable under
    those bare names from its root, but the code is ``scrapy_neardup.crawler`` and
    ``scrapy_neardup.dedup``: a bare import would load a second copy of a module."""
    bare = sorted(m for m in sys.modules if m.split(".")[0] in ("crawler", "dedup"))
    if bare:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nmodules imported under a bare repository name (use scrapy_neardup.*): {bare}", file=sys.stderr)
