"""For ``bench/crawl_ab.py --patch``: the filter's workers as they were before the page exchange
moved into the crawl's event loop (a thread per worker sent each page, waited on the socket and
handed the answer back): that module read from the repository's history (commit ``FORMER``), run
in the package beside today's, and put in the middleware's hands."""
import subprocess
import sys
import types
from pathlib import Path

import scrapy_neardup.crawler.middleware as middleware

FORMER = "777b23e"
ROOT = Path(__file__).resolve().parents[3]
source = subprocess.run(["git", "-C", str(ROOT), "show", f"{FORMER}:crawler/filter/workers.py"],
                        capture_output=True, text=True, check=True).stdout
module = types.ModuleType("scrapy_neardup.crawler.filter.former_workers")
module.__package__ = "scrapy_neardup.crawler.filter"
sys.modules[module.__name__] = module
exec(compile(source, f"{FORMER}:crawler/filter/workers.py", "exec"), module.__dict__)
middleware.FingerprintWorkers = module.FingerprintWorkers
