"""The add-on as a Scrapy user adopts it: a new ``scrapy startproject``, the one
``ADDONS`` line, a crawl of a local site with an empty compiled-code cache.

The project is named ``crawler``, then ``dedup``: the names of the repository's
folders, which must not shadow (or be shadowed by) a user's project. The
``crawler`` project runs in a fresh virtualenv with the built wheel installed
(tests/fixtures/wheel.py), the ``dedup`` one with the checkout's install; both
run outside the repository with no ``PYTHONPATH``, and the spider logs where
every module of the add-on and of the project was imported from.

It checks that the crawl never stalls while the kernels compile (no gap of
more than 2 s between requests the server sees), that the filter works, and
that the project directory gains no file.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.http import PageServer
from tests.fixtures.wheel import ROOT, WheelVenv, distributions, wheel_venv  # noqa: F401 (fixtures)
from tests.test_crawl import stat

SPIDER = '''
import json
import sys

import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"
    allowed_domains = ["127.0.0.1"]

    def __init__(self, start="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "title": None, "text": None, "fingerprint": None}
        yield from response.follow_all(css="a", callback=self.parse)

    def closed(self, reason):
        origins = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
                   if name.split(".")[0] in ("scrapy_neardup", "crawler", "dedup")}
        self.logger.info("module origins: %s", json.dumps(origins))
'''

WORDS = ("crawler fingerprint simhash table permuted hamming distance page text index store frontier request "
         "response spider middleware pipeline scheduler queue bandwidth mirror duplicate near copy").split()


class _Site:
    """``n`` distinct pages (``/p/<i>.html``, each linking to the next few),
    and an exact copy of every tenth under ``/copy/``; records request times."""

    def __init__(self, n: int) -> None:
        rng = random.Random(3)
        self.pages = {}
        for i in range(n):
            body = " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(120))
            links = "".join(f'<a href="/p/{j}.html">next {j}</a> ' for j in range(i + 1, min(n, i + 4)))
            if i % 10 == 0:
                links += f'<a href="/copy/{i}.html">copy</a>'
            self.pages[f"/p/{i}.html"] = f"<html><title>Page {i}</title><body><p>{body}</p>{links}</body></html>"
        for i in range(0, n, 10):
            self.pages[f"/copy/{i}.html"] = self.pages[f"/p/{i}.html"]

    def page(self, path: str) -> tuple[int, dict[str, str], bytes]:
        page = self.pages.get(path)
        return 200 if page else 404, {"Content-Type": "text/html; charset=utf-8"}, (page or "not found").encode()


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def _checkout_env() -> dict[str, str]:
    """The test interpreter's environment (the checkout's editable install),
    without what could point a subprocess into the repository."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "SCRAPY_"))}


def _module_origins(log: str) -> dict[str, str | None]:
    (line,) = [line for line in log.splitlines() if "module origins: " in line]
    return json.loads(line.split("module origins: ", 1)[1])


@pytest.mark.parametrize("name, install", [("crawler", "wheel"), ("dedup", "checkout")],
                         ids=["crawler-from-the-wheel", "dedup-from-the-checkout"])
def test_new_project_with_the_addon_and_a_cold_cache(name, install, tmp_path, request):
    if install == "wheel":
        venv: WheelVenv = request.getfixturevalue("wheel_venv")
        python, env, package_home = str(venv.python), venv.env(), venv.site_packages / "scrapy_neardup"
    else:
        python, env, package_home = sys.executable, _checkout_env(), ROOT
    env |= {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    assert not tmp_path.is_relative_to(ROOT)
    r = subprocess.run([python, "-m", "scrapy", "startproject", name], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    project = tmp_path / name
    settings = project / name / "settings.py"
    settings.write_text(settings.read_text() + '\nADDONS = {"scrapy_neardup.NearDupAddon": 0}\n')
    (project / name / "spiders" / "pages.py").write_text(SPIDER)
    before = _files(project)
    site = _Site(400)
    with PageServer(site.page) as server:
        url = f"{server.url}/p/0.html"
        r = subprocess.run([python, "-m", "scrapy", "crawl", "pages", "-a", f"start={url}",
                            "-s", "DOWNLOAD_DELAY=0", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=8",
                            "-s", "LOG_LEVEL=INFO", "-s", "STATS_DUMP=True"],
                           cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    log = r.stderr
    assert "'neardup/kept': 400" in log, log[-3000:]
    # the 40 copies: dropped, or (once the filter has learned that /copy/ mirrors /p/, byte for byte) confirmed by
    # a ranged GET, their bodies never downloaded
    copies = [stat(log, key) or 0 for key in ("neardup/dropped", "neardup/requests_avoided",
                                               "neardup/url_rules/range_confirmed")]
    assert sum(copies) == 40, (copies, log[-3000:])
    # with a cold cache every page was fingerprinted before the worker was ready: no wait for it
    assert "neardup/fingerprinted_while_workers_start" in log
    times = sorted(server.times)
    assert len(times) >= 400
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 2.0, f"the crawl stalled for {max(gaps):.1f} s"
    assert _files(project) == before, "the crawl wrote into the project directory"

    # the add-on came from the install under test, the project's modules from the project
    origins = _module_origins(log)
    add_on = {m: f for m, f in origins.items() if m.split(".")[0] == "scrapy_neardup"}
    assert "scrapy_neardup.crawler.addon" in add_on
    assert all(f and Path(f).is_relative_to(package_home) for f in add_on.values()), add_on
    users = {m: f for m, f in origins.items() if m.split(".")[0] == name}
    assert {name, f"{name}.settings", f"{name}.spiders.pages"} <= set(users)
    assert all(f and Path(f).is_relative_to(project) for f in users.values()), users
    other = {m for m in origins if m.split(".")[0] in ("crawler", "dedup")} - set(users)
    assert not other, f"modules under the repository's bare folder names: {sorted(other)}"
