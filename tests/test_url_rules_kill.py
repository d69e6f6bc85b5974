"""Learned URL rules lose nothing and fetch nothing twice (issue 28, section 1),
on the generated site of 400 pages with session ids, mobile and print copies
(``tests.fixtures.trap_site.CopiesSite``), whose ``sid`` rule is learned on the
first pages and retired on the last ones, where a session id gives another page.

* A clean crawl without ``JOBDIR`` fetches no URL twice, keeps every distinct
  content, and retires only the ``sid`` rule (the prefix rules' pairs are not
  contradicted by a pair that differs in ``sid`` alone).
* ``SIGKILL`` at seeded random moments, one of them just after the ``sid``
  rule is retired (a random delay after the log says so, while its avoided
  requests are being queued), then resumes with the same ``JOBDIR`` until the
  crawl finishes: the kept contents are the clean run's.

Each trial has a recorded seed (in the test id and the failure message); set
``NEARDUP_KILL_TRIALS`` for more trials than the default two.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.trap_site import CopiesSite
from tests.test_crawl import read_jsonl, scrapy_crawl, stat
from tests.test_kill_resume import assert_gone, children

TRIALS = int(os.environ.get("NEARDUP_KILL_TRIALS", "2"))
RETIRED = "URL rule retired: param"


def target(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_a_clean_crawl_fetches_no_url_twice_and_retires_only_the_rule_contradicted(tmp_path):
    site = CopiesSite()
    with site.serve() as server:
        r = scrapy_crawl(server.url + "/", tmp_path, f"NEARDUP_STORE={tmp_path / 'store'}", "NEARDUP_INDEX=",
                         "LOG_LEVEL=INFO", "CONCURRENT_REQUESTS=8")
        hits = {t: n for t, n in server.hits.items() if t != "/robots.txt"}
    assert r.returncode == 0, r.stderr[-3000:]
    log = r.stderr
    twice = sorted(t for t, n in hits.items() if n > 1)
    assert not twice, f"fetched twice: {twice[:10]}"
    assert site.contents() <= {site.truth(t) for t in hits}
    # the sid rule, learned on the first pages, is retired on the last; the prefix rules hold
    assert stat(log, "neardup/url_rules/learned") >= 3 and "URL rule learned: param" in log
    assert "URL rule learned: prefix" in log  # (/p/ /m/, /print/ /p/; /print/ /m/ in some orders)
    assert stat(log, "neardup/url_rules/retired") == 1 and RETIRED in log
    assert "URL rule retired: prefix" not in log
    requeued = stat(log, "neardup/url_rules/requeued")
    assert requeued and requeued >= 1
    # what was avoided: never downloaded, and withdrawn in the duplicates file when made after all
    lines = read_jsonl(tmp_path / "store" / "duplicates.jsonl")
    withdrawn = {d["url"] for d in lines if d.get("requeued")}
    avoided = {d["url"] for d in lines if d.get("avoided")} - withdrawn
    assert avoided and not {target(u) for u in avoided} & set(hits)
    assert stat(log, "neardup/requests_avoided") == len(avoided)
    assert all(site.truth(target(d["url"])) == site.truth(target(d["duplicate_of"]))
               for d in lines if d.get("avoided") and d["url"] in avoided)
    # a requeued request keeps its Referer
    assert all(d.get("referer") for d in lines if d.get("avoided"))


def crawl_cmd(url: str, jobdir: Path, *settings: str) -> list[str]:
    cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "crawl", "site",
           "-a", f"start_url={url}/", "-s", f"JOBDIR={jobdir}", "-s", "AUTOTHROTTLE_ENABLED=False",
           "-s", "ROBOTSTXT_OBEY=False", "-s", "CONCURRENT_REQUESTS=8", "-s", "LOG_LEVEL=INFO",
           "-s", "STATS_DUMP=True"]
    for s in settings:
        cmd += ["-s", s]
    return cmd


#: the n-th request the retired sid rule puts back (``KillAt``: the crawl kills itself there)
PUTTING_BACK = "sid retired)"


def run_until_done(url: str, jobdir: Path, server, rng: random.Random, plan: list[str]) -> tuple[list[str], str]:
    """Start the crawl and kill it (SIGKILL) as ``plan`` says, one entry a run:
    ``"hits"`` after a random number (20-400) of new requests reached the server,
    ``"early hits"`` the same, 20-60: before the sid rule is retired (it is on
    page 40 or 47, some 80 requests in at the least), so a ``"retired"`` can follow,
    ``"retired"`` a random 0-60 ms after the log says the sid rule is retired,
    ``"putting back"`` (the crawl kills itself, ``tests.fixtures.kill_at``) as
    it puts back a random one of the first 8 requests the retired sid rule
    avoided, before the frontier has committed them; no kill if that run
    finishes first. Then let it finish; returns the kills made and the logs."""
    kills = 0
    killed: list[str] = []
    plan = list(plan)
    logs = []
    while True:
        before = sum(server.hits.values())
        how = plan.pop(0) if plan else None
        log = jobdir.parent / f"{jobdir.name}.{len(logs)}.log"  # (one a run: kept for a failure's post-mortem)
        settings = ['EXTENSIONS={"tests.fixtures.kill_at.KillAt": 0}', f"KILL_AT={PUTTING_BACK}",
                    f"KILL_AT_COUNT={rng.randint(1, 8)}"] if how == "putting back" else []
        with open(log, "w") as err:
            proc = subprocess.Popen(crawl_cmd(url, jobdir, *settings), cwd=ROOT, stdout=subprocess.DEVNULL,
                                    stderr=err)
        if how == "putting back":
            proc.wait(timeout=600)
            if proc.returncode == -signal.SIGKILL:
                kills += 1
                killed.append(how)
                logs.append(log.read_text(errors="replace"))
                continue
        elif how is not None:
            deadline = time.monotonic() + 120
            target_hits = before + rng.randint(20, 60 if how == "early hits" else 400)
            while proc.poll() is None and time.monotonic() < deadline:
                if how.endswith("hits") and sum(server.hits.values()) >= target_hits:
                    break
                if how == "retired" and RETIRED in log.read_text(errors="replace"):
                    time.sleep(rng.uniform(0, 0.06))
                    break
                time.sleep(0.002)
            if proc.poll() is None:
                workers = children(proc.pid)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                kills += 1
                killed.append(how)
                assert_gone(workers)
                logs.append(log.read_text(errors="replace"))
                continue
        proc.wait(timeout=600)
        text = log.read_text(errors="replace")
        logs.append(text)
        assert proc.returncode == 0, text[-3000:]
        if "'finish_reason': 'finished'" in text:
            return killed, "\n".join(logs)


def kept_contents(site: CopiesSite, jobdir: Path) -> list[str]:
    db = sqlite3.connect(jobdir / "neardup" / "index.sqlite3")
    try:
        return [site.truth(target(u)) for (u,) in db.execute("SELECT url FROM pages")]
    finally:
        db.close()


@pytest.fixture(scope="module")
def clean_kept(tmp_path_factory) -> list[str]:
    site = CopiesSite()
    jobdir = tmp_path_factory.mktemp("clean") / "job"
    with site.serve() as server:
        run_until_done(server.url, jobdir, server, random.Random(0), [])
        over = {t: n for t, n in server.hits.items() if n > 1 and t != "/robots.txt"}
    assert not over, f"clean run with JOBDIR fetched twice: {sorted(over)[:10]}"
    return kept_contents(site, jobdir)


@pytest.mark.parametrize("seed", list(range(1, TRIALS + 1)))
def test_kills_at_random_moments_and_right_after_a_retirement_lose_nothing(seed, tmp_path, clean_kept):
    site = CopiesSite()
    rng = random.Random(seed)
    # (after the retirement the rule stays retired: one kill at it a trial, just after it or in the middle
    # of the requests it puts back, then one at a random moment)
    plan = ["early hits", "retired", "hits"] if seed % 2 else ["putting back", "hits"]
    with site.serve() as server:
        killed, log = run_until_done(server.url, tmp_path / "job", server, rng, plan)
        hits = dict(server.hits)
    kills = len(killed)
    what = f"seed {seed}, plan {plan}, kills {killed}"
    assert plan[-2] in killed, what
    kept = kept_contents(site, tmp_path / "job")
    assert RETIRED in log, what
    assert len(kept) == len(set(kept)), f"{what}: a content kept twice"
    assert set(kept) == set(clean_kept) == site.contents(), \
        f"{what}: lost {sorted(site.contents() - set(kept))[:10]}, clean run lost " \
        f"{sorted(site.contents() - set(clean_kept))[:10]}"
    over = {t: n for t, n in hits.items() if n > kills + 1 and t != "/robots.txt"}
    assert not over, f"{what}: requested more than kills + 1 times: {sorted(over)[:10]}"
