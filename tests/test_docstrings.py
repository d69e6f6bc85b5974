"""The examples in the docstrings of both packages, and of the tests' generated sites, run as written."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import scrapy_neardup
import scrapy_neardup.crawler
import scrapy_neardup.dedup

MODULES = ["scrapy_neardup"] + sorted(m.name for pkg in (scrapy_neardup.dedup, scrapy_neardup.crawler) for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                 if not m.name.endswith("__main__")) + ["tests.fixtures.mirror_site", "tests.fixtures.trap_site"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
