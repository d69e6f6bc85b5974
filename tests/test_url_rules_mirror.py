"""Learned URL rules on a language mirror (issue 28, section 2): the generated
site of ``tests.fixtures.mirror_site`` served by a real nginx (so ``ETag`` and
``Last-Modified`` are nginx's: mtime and size), crawled from three language
front pages with the defaults: sub-tree rules act on their first pair, each predicted copy
confirmed by a ranged GET (``NEARDUP_URL_RULES_CONFIRM_BYTES``, 256 bytes by default).

The ``/de/`` -> ``/en/`` prefix rules meet translated front pages and are
retired; the sub-tree rules (``/de/api/`` -> ``/en/api/``) are learned and
predict copies, each confirmed by the bytes of a ranged GET before its body
would be downloaded. Every distinct page is downloaded whole, the planted
traps (distinct pages with the same size and mtime as the page they would
copy) among them; every confirmed copy has the bytes of the page it was
mapped to; no URL is downloaded whole twice, and no URL is requested twice
(a ranged GET, then the whole) but a trap: a ranged GET carries ``If-Range``
with the ETag of the page it would copy, so a translated page comes whole in
the answer to it, and leaves its sub-tree's rule acting (only a trap retires one).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.mirror_site import MirrorSite
from tests.test_crawl import read_jsonl, scrapy_crawl, stat

sys.path.insert(0, str(ROOT / "bench"))

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()),
                                reason="nginx is not installed (apt-get install nginx-light)")


@pytest.mark.parametrize("linked", [True, False], ids=["symlinked", "copies-of-their-own"])
def test_sub_tree_rules_confirmed_by_ranged_gets_lose_no_page_and_no_trap_with_the_defaults(tmp_path, linked):
    """``linked=False``: each copy is a file of its own, each folder with its own mtime (versioned trees),
    so a copy's ETag is not its page's: the first copy that comes whole shows its rule the ETags its copies have."""
    from crawl_bench import free_port, start_nginx

    site = MirrorSite(langs=4, sizes={"intro": 2, "guide": 8, "api": 30}, traps=3, scattered=1, linked=linked,
                      trap_kinds=("tail", "head", "whole"), words=500)  # (the first two: one window in the middle
    # does not see them; pages of 4-5 kB, confirmed by a window in each sixteenth)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-"))  # (pytest's are private: nginx's workers
    served.chmod(0o755)                                         # run unprivileged)
    root = served / "site"
    site.build(root)
    port = free_port()
    log = tmp_path / "access.log"
    (tmp_path / "nginx").mkdir()
    nginx = start_nginx(root, port, tmp_path / "nginx", log)
    base = f"http://127.0.0.1:{port}"
    try:
        r = scrapy_crawl(",".join(base + s for s in site.starts(3)), tmp_path, f"NEARDUP_STORE={tmp_path / 'store'}",
                         "NEARDUP_INDEX=", "LOG_LEVEL=INFO", "ROBOTSTXT_OBEY=False")  # (the rules' defaults)
    finally:
        nginx.terminate()
        nginx.wait(10)
    try:
        check(site, r, tmp_path, log, base)
    finally:
        shutil.rmtree(served, ignore_errors=True)


def test_a_server_that_answers_one_range_only_is_asked_for_one_window(tmp_path):
    """nginx with ``max_ranges 1`` answers a multi-range GET whole, as Amazon S3 and Varnish do: the first such
    answer makes the host one asked for the one window (``multi_range_refused``), which confirms copies as
    before; no page is lost, none downloaded whole twice."""
    from crawl_bench import free_port, start_nginx

    site = MirrorSite(langs=4, sizes={"intro": 2, "guide": 8, "api": 30}, traps=2, scattered=1, words=500)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-one-range-"))
    served.chmod(0o755)
    site.build(served / "site")
    port, log = free_port(), tmp_path / "access.log"
    (tmp_path / "nginx").mkdir()
    nginx = start_nginx(served / "site", port, tmp_path / "nginx", log, server="max_ranges 1;")
    base = f"http://127.0.0.1:{port}"
    try:
        r = scrapy_crawl(",".join(base + s for s in site.starts(3)), tmp_path, f"NEARDUP_STORE={tmp_path / 'store'}",
                         "NEARDUP_INDEX=", "LOG_LEVEL=INFO", "ROBOTSTXT_OBEY=False")
    finally:
        nginx.terminate()
        nginx.wait(10)
    try:
        check(site, r, tmp_path, log, base, multi=False)
        assert stat(r.stderr, "neardup/url_rules/multi_range_refused") == 1
        assert "answered a multi-range GET whole or in one range" in r.stderr
    finally:
        shutil.rmtree(served, ignore_errors=True)


def check(site: MirrorSite, r, tmp_path: Path, log: Path, base: str, multi: bool = True) -> None:
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
    whole = [t for _, status, t in lines if status == "200"]
    ranged = [t for _, status, t in lines if status == "206"]
    twice = sorted({t for t in whole if whole.count(t) > 1})
    assert not twice, f"downloaded whole twice: {twice[:10]}"
    every = {site.truth(f"/{lang}/{p}") for lang in site.langs for p in site.pages()}
    assert every <= {site.truth(t) for t in whole}, "a distinct page was never downloaded"
    assert set(site.traps) <= set(whole), "a planted trap was confirmed as a copy"
    if multi:
        assert not stat(r.stderr, "neardup/url_rules/multi_range_refused")  # (nginx answers several ranges in parts)
    assert ranged, "no copy was confirmed by a ranged GET"
    mirrored = (len(site.langs) - 1) * len(site.pages()) - len(site.translated)  # (copies a plain crawl downloads)
    saved = stat(r.stderr, "neardup/url_rules/range_confirmed")
    # (the savings come with the defaults: 83 of 115 in a run; the order pages arrive in moves it)
    assert saved >= mirrored // 2, f"{saved} of {mirrored} copies confirmed"
    confirmed = [d for d in read_jsonl(tmp_path / "store" / "duplicates.jsonl") if d.get("avoided")]
    assert len(confirmed) == stat(r.stderr, "neardup/url_rules/range_confirmed")
    for d in confirmed:  # (every confirmation checked against the file it would have served)
        assert site.truth(d["url"][len(base):]) == site.truth(d["duplicate_of"][len(base):]), d
    # a sub-tree rule acts only through confirmation: a translated page under it comes whole in the answer to its
    # ranged GET (another ETag), at a plain crawl's cost, and leaves it acting; only a miss that costs a request
    # more (a planted trap: the same ETag, other bytes) retires it
    if not site.linked:
        # copies with ETags of their own: where one came whole, its rule learns how a copy's ETag differs from its
        # page's (the folder's mtime), and its later ranged GETs name the copy's: answered with the range. A page
        # that is not a copy (translated: another size; a trap: its page's mtime) comes whole in one request
        assert (stat(r.stderr, "neardup/url_rules/etag_learned") or 0) >= 1
        assert not stat(r.stderr, "neardup/url_rules/if_range_off")
        # (but a trap met under a rule before it learned its copies' ETag: the page's, its trap's too)
        assert set(ranged) & set(whole) <= set(site.traps), sorted(set(ranged) & set(whole))
        return
    assert "URL rule retired: prefix" in r.stderr
    for spec, why in re.findall(r"URL rule retired: (prefix \S+ /\w+/\w+/ /\w+/\w+/) \((.*)\)", r.stderr):
        assert any(base + t in why.split(" != ") for t in site.traps), (spec, why)
    assert (stat(r.stderr, "neardup/url_rules/missed_whole") or 0) >= 1  # (each language has a translated guide page)
    assert not stat(r.stderr, "neardup/url_rules/if_range_off")  # (a copy has its page's ETag: none came whole)
    # politeness: a URL is requested once, as a plain crawl would, but for a planted trap met under an acting
    # rule (the same ETag as its predicted copy: If-Range lets the range come, its bytes differ, then the whole);
    # a translated page (another ETag) comes whole in the answer to its ranged GET
    assert set(ranged) & set(whole) <= set(site.traps), sorted(set(ranged) & set(whole) - set(site.traps))
    assert len(lines) <= len({t for _, _, t in lines}) + len(site.traps)
    assert re.search(r"URL rule learned: prefix \S+ /\w+/api/ /\w+/api/", r.stderr)  # (a sub-tree's)


def test_two_processes_sharing_redis_lose_no_page_of_the_mirror(tmp_path, redis_server):
    """The mirror crawled by two processes sharing one Redis (frontier, store and rule book): scrapy-redis's
    queue hands requests out in the order of their encoded bytes, so a language's ``api/`` pages come before
    its translated front page and ``intro/``. A prefix rule learned from ``/fr/api/`` copies acts only in the
    sections where its pairs agreed; a process that learns of a rule another made judges the pages it met
    before. Before, ``prefix /fr/ /en/`` acted on ten ``api/`` pairs everywhere under ``/fr/`` and left out the
    translated front page and ``intro/`` for good (61 distinct pages of the full mirror never fetched)."""
    from crawl_bench import free_port, start_nginx
    from url_rules_bench import shared_crawls

    site = MirrorSite(langs=4, sizes={"intro": 2, "guide": 8, "api": 30}, traps=2, scattered=1)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-shared-"))
    served.chmod(0o755)
    site.build(served / "site")
    db = 14
    redis_server.cli("-n", str(db), "flushdb")
    port, log = free_port(), tmp_path / "access.log"
    (tmp_path / "nginx").mkdir()
    nginx = start_nginx(served / "site", port, tmp_path / "nginx", log)
    base = f"http://127.0.0.1:{port}"
    outs = [tmp_path / f"p{i}" for i in range(2)]
    for out in outs:
        out.mkdir()
    try:
        codes = shared_crawls(",".join(base + s for s in site.starts(3)), outs,
                              f"redis://127.0.0.1:{redis_server.port}/{db}", [], timeout=600)
    finally:
        nginx.terminate()
        nginx.wait(10)
    try:
        texts = [(out / "crawl.log").read_text(errors="replace") for out in outs]
        assert codes == [0, 0], [t[-2000:] for t in texts]
        whole = [t for _, status, t in (line.split(" ", 2) for line in log.read_text().splitlines()) if status == "200"]
        every = {site.truth(f"/{lang}/{p}") for lang in site.langs for p in site.pages()}
        lost = every - {site.truth(t) for t in whole}
        assert not lost, f"{len(lost)} distinct pages never downloaded"
        assert set(site.traps) <= set(whole), "a planted trap was never downloaded"
        lines = [d for out in outs for d in read_jsonl(out / "job" / "neardup" / "duplicates.jsonl")]
        made = {d["url"] for d in lines if d.get("requeued")}  # (avoided, then made after all: a rule retired)
        for d in lines:  # (every avoided or confirmed URL checked against the file it would have served)
            if d.get("avoided") and d["url"] not in made:
                assert site.truth(d["url"][len(base):]) == site.truth(d["duplicate_of"][len(base):]), d
    finally:
        shutil.rmtree(served, ignore_errors=True)


def test_a_crawlspiders_copies_confirmed_by_ranged_gets_are_done_in_the_frontier(tmp_path):
    """A ``CrawlSpider`` (its requests have an errback) with ``JOBDIR``: a copy confirmed by its ranged GET
    ends in the downloader (``IgnoreRequest`` from ``AvoidMiddleware.process_response``, which no
    ``process_exception`` sees), and is done in the frontier by the failure path. Before, it was never
    acknowledged: a helper's resumes made every confirmed copy's ranged GET again (180-235 URLs 2-4 times)
    and gave up 71 of them "in flight, answered, at 4 kills". Here the crawl stops part-way
    (``CLOSESPIDER_ITEMCOUNT``) and is resumed: of the copies confirmed before the stop, only those of its
    last checkpoints are asked for again (a failure is done one checkpoint, a second, later, so that an
    errback's requests are queued first), not all."""
    import subprocess

    from crawl_bench import free_port, start_nginx

    site = MirrorSite(langs=3, sizes={"intro": 2, "guide": 6, "api": 40}, traps=1, scattered=1)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-crawlspider-"))
    served.chmod(0o755)
    site.build(served / "site")
    port, log = free_port(), tmp_path / "access.log"
    (tmp_path / "nginx").mkdir()
    nginx = start_nginx(served / "site", port, tmp_path / "nginx", log)
    base = f"http://127.0.0.1:{port}"

    def crawl(*more: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "runspider",
               str(ROOT / "tests" / "fixtures" / "crawl_spider.py"), "-a", "start=" + ",".join(base + s for s in site.starts(2)),
               "-s", "CONCURRENT_REQUESTS=1", "-s", "LOG_LEVEL=INFO", "-s", "ROBOTSTXT_OBEY=False",
               "-s", f"JOBDIR={tmp_path / 'job'}", "-s", 'ADDONS={"scrapy_neardup.NearDupAddon": 0}', *more]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)

    try:
        first = crawl("-s", "CLOSESPIDER_ITEMCOUNT=45", "-s", "DOWNLOAD_DELAY=0.1")  # (a few seconds: checkpoints)
        assert first.returncode == 0 and "'finish_reason': 'closespider_itemcount'" in first.stderr, first.stderr[-3000:]
        lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
        confirmed = {t for _, status, t in lines if status == "206"}
        assert confirmed, first.stderr[-3000:]
        again = crawl()
        assert again.returncode == 0 and "'finish_reason': 'finished'" in again.stderr, again.stderr[-3000:]
        later = [t for _, _, t in (line.split(" ", 2) for line in log.read_text().splitlines()[len(lines):])]
        # (before, every one was asked for again; now those of the last second or two, done a checkpoint later)
        assert len(confirmed & set(later)) <= len(confirmed) // 2, (len(confirmed & set(later)), len(confirmed))
    finally:
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(served, ignore_errors=True)


def test_a_site_whose_every_page_links_every_page_has_its_sections_copies_confirmed(tmp_path):
    """MkDocs-like (``bench/other_mirrors/docsite.py --layout mkdocs``, three languages: a directory a page,
    the whole site's navigation in each), crawled by plain Scrapy and the defaults one request at a time from
    loopback nginx. A language's pages are all queued from its front page and fetched a few ms apart; a
    section's rule comes from its index page's verdict, which waited behind the others in the workers' queue:
    every copy was downloaded (0% spared) until a request waits for the verdicts of the pages above it
    (``filter.verdicts_due``): 84% here. No distinct page is lost, and every confirmed copy has the bytes of
    the page it was mapped to."""
    from url_rules_bench import other_mirror_site

    work = Path(tempfile.mkdtemp(prefix="neardup-mkdocs-"))  # (nginx's workers run unprivileged)
    work.chmod(0o755)
    try:
        row = other_mirror_site(work, "other-mkdocs-3")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rules = row["rules"]
    assert rules["contents_lost"] == [] and rules["wrong"] == 0, rules
    assert rules["saved_vs_plain"] >= 0.5, rules
    assert rules["requests_vs_plain"] <= 1.03, rules


def test_a_callback_awaiting_a_download_of_its_own_is_not_held_by_its_pages_verdict(tmp_path):
    """A section's index page whose callback awaits the download of the section's first page
    (``engine.download_async``): that request is below the index page, whose verdict waits for the callback.
    Only a request that came through the scheduler waits for the verdicts above it, so this one is made at
    once: no request waits its time out (``neardup/url_rules/held_too_long``), and every section's item has
    its first page."""
    import subprocess

    from crawl_bench import free_port, start_nginx

    site = MirrorSite(langs=3, sizes={"intro": 2, "guide": 6, "api": 12}, traps=0, scattered=1)
    served = Path(tempfile.mkdtemp(prefix="neardup-mirror-inline-"))
    served.chmod(0o755)
    site.build(served / "site")
    port = free_port()
    (tmp_path / "nginx").mkdir()
    nginx = start_nginx(served / "site", port, tmp_path / "nginx", tmp_path / "access.log")
    base = f"http://127.0.0.1:{port}"
    try:
        cmd = [sys.executable, "-W", "error::DeprecationWarning", "-m", "scrapy", "runspider",
               str(ROOT / "tests" / "fixtures" / "inline_download_spider.py"),
               "-a", "start=" + ",".join(base + s for s in site.starts(3)), "-o", str(tmp_path / "items.jsonl"),
               "-s", "LOG_LEVEL=INFO", "-s", "ROBOTSTXT_OBEY=False", "-s", "CONCURRENT_REQUESTS=4",
               "-s", f"NEARDUP_STORE={tmp_path / 'store'}", "-s", 'ADDONS={"scrapy_neardup.NearDupAddon": 0}']
        r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    finally:
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(served, ignore_errors=True)
    assert r.returncode == 0 and "'finish_reason': 'finished'" in r.stderr, r.stderr[-3000:]
    assert not stat(r.stderr, "neardup/url_rules/held_too_long"), r.stderr[-3000:]
    assert stat(r.stderr, "neardup/url_rules/learned") > 0, r.stderr[-3000:]  # (a host with rules)
    sections = [d for d in read_jsonl(tmp_path / "items.jsonl") if "first" in d]
    assert sections and all(d["first"] == 200 for d in sections), sections
