"""What every command shares: one-line failures and whole-number arguments."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def fail(command: str, message: str, code: int = 2) -> int:
    """Say why ``neardup COMMAND`` did not do its job, in one line on stderr; return ``code``."""
    print(f"neardup {command}: {message}", file=sys.stderr)
    return code


def whole(lo: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``lo``."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = lo - 1
        if number < lo:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {lo}, got {value!r}")
        return number
    return parse
