"""``python -m scrapy_neardup``: the ``neardup`` command."""

import sys

from .crawler.cli import main

sys.exit(main())
