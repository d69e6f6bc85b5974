"""Learned URL rules with confirmation by content lose nothing across kills:
the language mirror of ``tests.fixtures.mirror_site`` served by a real nginx,
crawled with ``JOBDIR`` and the defaults (sub-tree rules, each predicted copy a
ranged GET checked against the fetched page's bytes), killed (``SIGKILL``) at
seeded random moments, one of them just after the log says a sub-tree rule is
learned, and resumed until the crawl finishes (``bench/url_rules_bench.py``'s
``crawl_killed``).

* The kept contents are a clean run's: every distinct page, once.
* Every distinct page and every planted trap (same size and mtime as the page
  it would copy) is downloaded whole; every confirmed copy has its page's bytes.
* Nothing is downloaded whole more than kills + 1 times (nor requested, ranged
  GETs included, more than twice that: a mismatch is a ranged GET then a GET).
* The pages fetched before a kill still confirm their copies after the resume
  (their heads are in the rule book): no prediction is made whole unconfirmed.

Each trial has a recorded seed (in the test id and the failure message); set
``NEARDUP_KILL_TRIALS`` for more trials than the default two.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.mirror_site import MirrorSite
from tests.test_crawl import read_jsonl, stat
from tests.test_kill_resume import assert_gone

sys.path.insert(0, str(ROOT / "bench"))

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()),
                                reason="nginx is not installed (apt-get install nginx-light)")

TRIALS = int(os.environ.get("NEARDUP_KILL_TRIALS", "2"))
SUB_TREE_LEARNED = r"URL rule learned: prefix \S+ /\w+/api/ /\w+/api/"


@pytest.fixture(scope="module")
def site() -> Iterator[MirrorSite]:
    s = MirrorSite(langs=4, sizes={"intro": 2, "guide": 8, "api": 30}, traps=2, scattered=1)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-kill-"))  # (nginx's workers run unprivileged)
    served.chmod(0o755)
    s.build(served / "site")
    yield s
    shutil.rmtree(served, ignore_errors=True)


def crawl(site: MirrorSite, out: Path, plan: list[int | str], seed: int) -> tuple[str, int, list[list[int]], list]:
    """The mirror crawled with ``JOBDIR`` (``out/job``), killed as ``plan`` says
    (``crawl_killed``); its logs, kills, killed crawls' workers and nginx's
    access log lines (time, status, target)."""
    from crawl_bench import free_port, start_nginx
    from url_rules_bench import crawl_killed

    assert site.root is not None
    port = free_port()
    log = out.parent / f"{out.name}-access.log"
    (out.parent / f"{out.name}-nginx").mkdir()
    nginx = start_nginx(site.root, port, out.parent / f"{out.name}-nginx", log)
    base = f"http://127.0.0.1:{port}"
    try:
        # (CONCURRENT_REQUESTS=1, as the mirror's benchmark: the order pages come in decides what is learned when)
        text, kills, workers = crawl_killed(",".join(base + s for s in site.starts(3)), out,
                                            [f"NEARDUP_INDEX={out / 'store' / 'index.sqlite3'}"], log, plan,
                                            random.Random(seed))
    finally:
        nginx.terminate()
        nginx.wait(10)
    return text, kills, workers, [line.split(" ", 2) for line in log.read_text().splitlines()]


def kept_contents(site: MirrorSite, out: Path) -> list[str | None]:
    db = sqlite3.connect(out / "store" / "index.sqlite3")
    try:
        return [site.truth("/" + u.split("/", 3)[3]) for (u,) in db.execute("SELECT url FROM pages")]
    finally:
        db.close()


@pytest.fixture(scope="module")
def clean_kept(site, tmp_path_factory) -> list[str | None]:
    out = tmp_path_factory.mktemp("clean") / "crawl"
    text, kills, _, lines = crawl(site, out, [], 0)
    assert kills == 0
    assert stat(text, "neardup/url_rules/range_confirmed"), "no copy was confirmed by a ranged GET"
    return kept_contents(site, out)


@pytest.mark.parametrize("seed", list(range(1, TRIALS + 1)))
def test_kills_with_confirmation_by_content_lose_no_page_no_trap_and_fetch_nothing_again(seed, site, clean_kept,
                                                                                         tmp_path):
    rng = random.Random(seed)
    plan: list[int | str] = [SUB_TREE_LEARNED, rng.randint(50, 300), rng.randint(50, 300)]
    rng.shuffle(plan)
    out = tmp_path / "crawl"
    text, kills, workers, lines = crawl(site, out, plan, seed)
    what = f"seed {seed}, plan {plan}, kills {kills}"
    for pids in workers:
        assert_gone(pids)
    assert kills >= 2, what
    kept = kept_contents(site, out)
    every = {site.truth(f"/{lang}/{p}") for lang in site.langs for p in site.pages()}
    assert len(kept) == len(set(kept)), f"{what}: a content kept twice"
    assert set(kept) == set(clean_kept) == every, f"{what}: lost {len(every - set(kept))} contents"
    whole = Counter(t for _, status, t in lines if status == "200")
    every_request = Counter(t for _, _, t in lines)
    assert every <= {site.truth(t) for t in whole}, f"{what}: a distinct page was never downloaded"
    assert set(site.traps) <= set(whole), f"{what}: a planted trap was confirmed as a copy"
    over = {t: n for t, n in whole.items() if n > kills + 1}
    assert not over, f"{what}: downloaded whole more than kills + 1 times: {sorted(over)[:10]}"
    over = {t: n for t, n in every_request.items() if n > 2 * (kills + 1)}
    assert not over, f"{what}: requested more than 2 (kills + 1) times: {sorted(over)[:10]}"
    base = "http://" + text.split("http://", 1)[1].split("/", 1)[0]
    confirmed = [d for d in read_jsonl(out / "store" / "duplicates.jsonl") if d.get("avoided")]
    assert confirmed, what
    for d in confirmed:  # (every confirmation checked against the file it would have served)
        assert site.truth(d["url"][len(base):]) == site.truth(d["duplicate_of"][len(base):]), (what, d)
    # the pages fetched before the last kill still confirm their copies: their heads are in the rule book
    # (a killed crawl dumps no stats: these are the last run's, a resumed one)
    unconfirmable = stat(text, "neardup/url_rules/unconfirmable")
    assert unconfirmable is None, f"{what}: {unconfirmable} predictions made whole, their pages' heads unknown"


CAME_WHOLE = r"URL rule (prefix \S+ \S+ \S+): a copy came whole in the answer to its ranged GET"
API_CAME_WHOLE = r"URL rule prefix \S+ /\w+/api/ /\w+/api/: a copy came whole"  # (30 pages a language: more to come)


def test_an_etag_change_learned_for_a_rule_is_kept_after_a_kill_and_a_resume(tmp_path):
    """Copies that are files of their own (``linked=False``: their ETags are not their pages'): the first
    copy that comes whole under a rule shows how its ETag differs (nginx's mtime), and the rule's later
    ranged GETs carry ETags made so. The crawl is killed just after that and resumed: the change is kept
    in the rule book, so the rule's copies are answered with their ranges, not downloaded whole again
    until a copy comes whole once more."""
    from crawl_bench import free_port, start_nginx
    from url_rules_bench import crawl_killed

    site = MirrorSite(langs=4, sizes={"intro": 2, "guide": 8, "api": 30}, traps=2, scattered=1, linked=False)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-files-"))  # (nginx's workers run unprivileged)
    served.chmod(0o755)
    site.build(served / "site")
    port, log, out = free_port(), tmp_path / "access.log", tmp_path / "crawl"
    (tmp_path / "nginx").mkdir()
    # (each request's If-Range header, "-" for none, and the answer's ETag, at the end of its line)
    nginx = start_nginx(served / "site", port, tmp_path / "nginx", log,
                        "$msec $status $request_uri $http_if_range $sent_http_etag")
    base = f"http://127.0.0.1:{port}"
    kill_times: list[float] = []
    try:
        text, kills, workers = crawl_killed(",".join(base + s for s in site.starts(3)), out,
                                            [f"NEARDUP_INDEX={out / 'store' / 'index.sqlite3'}"], log,
                                            [API_CAME_WHOLE], random.Random(7), kill_times)
        assert kills == len(kill_times) == 1
        check_etag_change_kept(site, text, out, log, kill_times)
        for pids in workers:
            assert_gone(pids)
    finally:
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(served, ignore_errors=True)


def check_etag_change_kept(site: MirrorSite, text: str, out: Path, log: Path, kill_times: list[float]) -> None:
    from scrapy_neardup.crawler.url_rules.rules import UrlRule

    resumed = (out / "crawl.log").read_text(errors="replace")  # (the last run's log; the killed run's before it)
    killed = text[: len(text) - len(resumed)]
    learned = set(re.findall(CAME_WHOLE, killed))
    assert any("/api/" in spec for spec in learned), learned
    # (a resumed crawl starts well after the kill: a request logged later is one of its own)
    after = [line.split(" ") for line in log.read_text().splitlines()
             if float(line.split(" ", 1)[0]) > kill_times[-1] + 0.5]
    for spec in learned:
        rule = UrlRule.parse(spec)
        under = [(status, target, if_range, etag) for _, status, target, if_range, etag in after
                 if target.startswith((rule.a, rule.b))]
        if "/api/" in spec:  # (a guide/ rule may have had nothing left, or be retired)
            ranged = [(if_range, etag) for status, _, if_range, etag in under if status == "206"]
            assert ranged, f"{spec}: no ranged GET after the resume"
            # (answered with the range because it named the copy's own ETag, not its page's)
            assert all(if_range == etag for if_range, etag in ranged if if_range != "-"), ranged[:5]
            assert any(if_range != "-" for if_range, _ in ranged), f"{spec}: no If-Range after the resume"
        assert f"URL rule {spec}: a copy came whole" not in resumed
    # (nothing lost either: every distinct page kept once, as in the other kill tests)
    kept = kept_contents(site, out)
    every = {site.truth(f"/{lang}/{p}") for lang in site.langs for p in site.pages()}
    assert len(kept) == len(set(kept)) and set(kept) == every
