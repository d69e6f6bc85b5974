"""The examples in the library's docstrings run as written."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dedup

MODULES = sorted(m.name for m in pkgutil.walk_packages(dedup.__path__, "dedup.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
