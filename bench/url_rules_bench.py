"""Requests saved by learned URL rules (issue 16): plain Scrapy, the filter
without rules, and the filter with them, on the same site in the same run.

    .venv/bin/python bench/url_rules_bench.py

Sites: the generated trap site (``tests/fixtures/trap_site.py``: session ids,
tracking and sort parameters, print views, a mirrored tree, ``index.html``
aliases, a calendar), the same with a parameter that starts to matter midway
(``changing``), the 400-page site with session ids, mobile and print copies
whose session id gives a page of its own on some pages (``copies``), the demo site, and from nginx sqlite3-doc, developers-reference
(crawled from its five language front pages: mirrored trees, partly
translated) and debian-reference. Every crawl
is ``scrapy crawl site`` with one request at a time (the order of a crawl
decides what is learned when, so one at a time keeps runs comparable), no
AutoThrottle. For each: requests made, *duplicate downloads* (responses whose
content an earlier response of the crawl already had: the trap site's ground
truth, the demo's planted pairs, or for sqlite3-doc the file nginx served),
how many of plain Scrapy's duplicate downloads were never made, requests
avoided by rules, and every avoided URL checked against the content it would
have had (``wrong``: it would have served other content than the page it was
mapped to; ``wrong_never_fetched``: of those, the ones not requested later
either, when a retired rule's avoided requests are made after all), and the
contents plain Scrapy fetched that the crawl did not (``contents_lost``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from crawl_bench import crawl_cmd, free_port, start_nginx  # noqa: E402

from scrapy_neardup.crawler.demo_site import DemoSite  # noqa: E402
from tests.fixtures.trap_site import CopiesSite, ShopSite, TrapSite  # noqa: E402

MODES = {"plain": ["NEARDUP_ENABLED=False"], "no rules": ["NEARDUP_URL_RULES=False"], "rules": []}
JOBDIR, KILLED = "rules+jobdir", "rules+killed"  # mirror modes: the defaults with JOBDIR, uninterrupted; killed and
#                                                 resumed (``crawl_killed``)
CONFIRM = 256  # bytes of a ranged GET confirming a predicted copy (NEARDUP_URL_RULES_CONFIRM_BYTES's default)


#: Requests at once in each crawl (``--concurrency``; 1 unless asked: the order pages come in is then the same
#: from run to run)
CONCURRENCY = 1
#: Scrapy settings added to every crawl's (``--setting``, e.g. ``DOWNLOAD_DELAY=0.1``)
EXTRA: list[str] = []


def run_crawl(url: str, out: Path, settings: list[str]) -> str:
    """One ``scrapy crawl site``, ``CONCURRENCY`` requests at a time; its log."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = crawl_cmd(url, out, CONCURRENCY, [f"NEARDUP_STORE={out / 'store'}", "NEARDUP_INDEX=", "ROBOTSTXT_OBEY=False",
                                  "LOG_LEVEL=INFO", *settings, *EXTRA])
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if r.returncode or "'finish_reason': 'finished'" not in r.stderr:
        raise RuntimeError(r.stderr[-2000:])
    return r.stderr


def crawl_killed(url: str, out: Path, settings: list[str], access_log: Path, plan: list[int | str],
                 rng: random.Random, kill_times: list[float] | None = None) -> tuple[str, int, list[list[int]]]:
    """``run_crawl`` with ``JOBDIR`` (``out/job``), killed (``SIGKILL``) as ``plan``
    says, one entry a run: an int ``n``, after a random 1..n new requests reached the
    server (lines of nginx's ``access_log``); a regular expression, a random 0-60 ms
    after the crawl's log first matches it. Then resumed until it finishes (a run
    that ends before its moment is not killed). Returns the logs, the kills made and
    each killed crawl's child processes (its fingerprint workers, which must end with it);
    ``kill_times``, if given, gets the time of each kill (``time.time()``)."""
    import signal

    from tests.test_kill_resume import children

    shutil.rmtree(out, ignore_errors=True)
    cmd = crawl_cmd(url, out, 1, [f"NEARDUP_STORE={out / 'store'}", "NEARDUP_INDEX=", "ROBOTSTXT_OBEY=False",
                                  "LOG_LEVEL=INFO", f"JOBDIR={out / 'job'}", *settings])
    del cmd[cmd.index("-O"): cmd.index("-O") + 2]  # (the items are not looked at: no feed to resume)
    plan, logs, kills, workers = list(plan), [], 0, []
    log = out / "crawl.log"

    def hits() -> int:
        return len(access_log.read_bytes().splitlines()) if access_log.exists() else 0

    while True:
        how = plan.pop(0) if plan else None
        target = hits() + rng.randint(1, how) if isinstance(how, int) else None
        with open(log, "w") as err:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        while how is not None and proc.poll() is None:
            if target is not None and hits() >= target:
                break
            if isinstance(how, str) and re.search(how, log.read_text(errors="replace")):
                time.sleep(rng.uniform(0, 0.06))
                break
            time.sleep(0.003)
        if how is not None and proc.poll() is None:
            workers.append(children(proc.pid))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            if kill_times is not None:
                kill_times.append(time.time())
            kills += 1
            logs.append(log.read_text(errors="replace"))
            continue
        proc.wait(timeout=1800)
        text = log.read_text(errors="replace")
        logs.append(text)
        if proc.returncode or "'finish_reason': 'finished'" not in text:
            raise RuntimeError(text[-2000:])
        return "\n".join(logs), kills, workers


def rule_stats(log: str) -> dict[str, int]:
    """A crawl's ``neardup/url_rules/*`` stats from its log, by their last part."""
    return {k: int(v) for k, v in re.findall(r"'neardup/url_rules/(\w+)': (\d+)", log)}


def summarize(targets: list[str], out: Path, truth: Callable[[str], str | None]) -> dict:
    """What a crawl requested (``targets``: path?query, in order) and avoided
    (its duplicates file), measured against ``truth`` (a target's content)."""
    seen: set[str] = set()
    dup_downloads = 0
    for t in targets:
        what = truth(t)
        if what is None:
            continue
        dup_downloads += what in seen
        seen.add(what)
    dups_file = out / "store" / "duplicates.jsonl"
    records = [json.loads(x) for x in dups_file.read_text().splitlines()] if dups_file.exists() else []
    # (a URL downloaded after all, its rule retired, has a later "requeued" line: not avoided)
    last = {r["url"]: r for r in records if r.get("avoided") or r.get("requeued")}
    avoided = [r for r in records if r.get("avoided")]
    never_downloaded = [r for r in last.values() if r.get("avoided")]

    wrong = [r for r in avoided if truth(_target(r["url"])) != truth(_target(r["duplicate_of"]))]
    requested = set(targets)
    wrong_never_fetched = [r for r in wrong if _target(r["url"]) not in requested]  # (a retired rule's: requeued)
    rules: dict[str, int] = {}
    for r in avoided:
        rules[r["rule"]] = rules.get(r["rule"], 0) + 1
    return {"requests": len(targets), "duplicate_downloads": dup_downloads, "contents": len(seen),
            "avoided": len(never_downloaded), "avoided_then_requeued": len(avoided) - len(never_downloaded),
            # (of those never downloaded, the copies a ranged GET confirmed: requested, their bodies not sent)
            "confirmed": sum(bool(r.get("confirmed")) for r in never_downloaded),
            "wrong": len(wrong), "wrong_never_fetched": len(wrong_never_fetched),
            "wrong_examples": [(r["url"], r["duplicate_of"])
                                                                             for r in wrong[:5]],
            "avoided_by_rule": rules, "content_set": sorted(seen)}


def compare(name: str, results: dict[str, dict]) -> dict:
    plain = results["plain"]["duplicate_downloads"]
    row = {"site": name}
    for mode, r in results.items():
        row[mode] = {k: v for k, v in r.items() if k != "content_set"}
        if mode != "plain":
            row[mode]["saved_vs_plain"] = round(1 - r["duplicate_downloads"] / plain, 3) if plain else None
            row[mode]["contents_lost"] = sorted(set(results["plain"]["content_set"]) - set(r["content_set"]))
    return row


#: Scrapy's breadth-first order (the polite profile's): the shop's crawls
BREADTH_FIRST = ["DEPTH_PRIORITY=1", "SCHEDULER_DISK_QUEUE=scrapy.squeues.PickleFifoDiskQueue",
                 "SCHEDULER_MEMORY_QUEUE=scrapy.squeues.FifoMemoryQueue"]


def local_site(name: str, respond, truth: Callable[[str], str | None], work: Path, start: str,
               more: list[str] | None = None) -> dict:
    from scrapy_neardup.crawler.demo_site import LocalServer

    results = {}
    for mode, settings in MODES.items():
        with LocalServer(respond) as server:
            run_crawl(server.url + start.lstrip("/"), work / f"{name}-{mode}", [*settings, *(more or [])])
            requests = [t for t in server.requests if t != "/robots.txt"]
            targets = [t for t in server.whole() if t != "/robots.txt"]
        results[mode] = summarize(targets, work / f"{name}-{mode}", truth)
        results[mode]["ranged_gets"] = len(requests) - len(targets)
        results[mode]["requests_all"] = len(requests)
        print(name, mode, {k: v for k, v in results[mode].items() if k != "content_set"}, flush=True)
    return compare(name, results)


def static_site(data: str, name: str, starts: list[str], work: Path) -> dict:
    """A site from ``../shared/data/sites/NAME.tar.gz`` served by nginx, crawled
    from ``starts`` (paths). A response's content is its file's bytes (so
    *duplicate downloads* are URLs whose file another URL served); an avoided
    URL is *wrong* when its page's visible text and that of the page it was
    mapped to share less than half their word 5-shingles (Jaccard < 0.5, what a
    reader sees as another page; ``weak``: below 0.8)."""
    import hashlib

    from quality import jaccard, shingles

    from scrapy_neardup.dedup.text import extract

    root = work / f"{name}-site"
    with tarfile.open(Path(data) / "sites" / f"{name}.tar.gz") as tf:
        tf.extractall(root, filter="data")
    root.chmod(0o755)
    site = root / name / "site"

    def file_of(target: str) -> Path | None:
        f = site / urlsplit(target).path.lstrip("/")
        if f.is_dir():
            f = f / "index.html"
        return f if f.is_file() else None

    def truth(target: str) -> str | None:
        f = file_of(target)
        return hashlib.md5(f.read_bytes()).hexdigest() if f else None

    def text_shingles(target: str) -> set[int]:
        f = file_of(target)
        return shingles(extract(f.read_bytes()).text) if f else set()

    results = {}
    for mode, settings in MODES.items():
        port = free_port()
        slug = mode.replace(" ", "-")  # (nginx's config takes paths without quotes)
        nginx = start_nginx(site, port, _fresh(work / f"{name}-nginx-{slug}"), work / f"{name}-{slug}.log")
        base = f"http://127.0.0.1:{port}"
        try:
            run_crawl(",".join(base + s for s in starts), work / f"{name}-{mode}", settings)
        finally:
            nginx.terminate()
            nginx.wait(10)
        targets = [line.split(" ", 2)[2] for line in (work / f"{name}-{slug}.log").read_text().splitlines()
                   if line.split(" ", 2)[1] == "200"]
        r = summarize(targets, work / f"{name}-{mode}", truth)
        avoided = [json.loads(x) for x in (work / f"{name}-{mode}" / "store" / "duplicates.jsonl").read_text()
                   .splitlines() if '"avoided"' in x] if mode == "rules" else []
        js = [jaccard(text_shingles(_target(a["url"])), text_shingles(_target(a["duplicate_of"]))) for a in avoided]
        r["wrong"] = sum(j < 0.5 for j in js)
        r["weak"] = sum(j < 0.8 for j in js)
        r["wrong_examples"] = [(a["url"], a["duplicate_of"], round(j, 2)) for a, j in zip(avoided, js) if j < 0.8][:5]
        results[mode] = r
        print(name, mode, {k: v for k, v in r.items() if k != "content_set"}, flush=True)
    return compare(name, results)


def mirror_site(work: Path, modes: dict[str, list[str]], kills: int = 3, seed: int = 1, name: str = "mirror",
                linked: bool = True, gzip: bool = False, **site_args) -> dict:
    """The generated language-mirror site (``tests/fixtures/mirror_site.py``: 10
    language folders, 80-95% of each the default language's file under a symlink,
    planted distinct pages of the same size and mtime at predicted-copy URLs),
    served by nginx, crawled from five language front pages. Besides the
    common figures: bodies transferred (a 200's file size; a ranged 206 its
    range), ranged GETs, and the planted traps not fetched whole (``traps_lost``). Modes
    ``JOBDIR`` and ``KILLED`` run with ``JOBDIR``, the latter killed ``kills`` times, each
    after a seeded random 1-400 requests, and resumed (``crawl_killed``)."""
    from tests.fixtures.mirror_site import MirrorSite

    site = MirrorSite(linked=linked, **site_args)  # (``mirror-files``: copies are files, each folder with its own mtime)
    root = work / f"{name}-site"
    site.build(root)
    results = {}
    for mode, settings in modes.items():
        port = free_port()
        slug = "".join(c if c.isalnum() else "-" for c in mode)
        log = work / f"{name}-{slug}.log"
        nginx = start_nginx(root, port, _fresh(work / f"{name}-nginx-{slug}"), log, gzip=gzip)
        base = f"http://127.0.0.1:{port}"
        try:
            if mode in (JOBDIR, KILLED):  # JOBDIR (and SIGKILL at seeded random moments, resumed until done)
                text, r_kills, _ = crawl_killed(",".join(base + s for s in site.starts()), work / f"{name}-{slug}",
                                             settings, log, [400] * kills if mode == KILLED else [],
                                             random.Random(seed))
            else:
                text = run_crawl(",".join(base + s for s in site.starts()), work / f"{name}-{slug}", settings)
        finally:
            nginx.terminate()
            nginx.wait(10)
        lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
        full = [t for _, status, t in lines if status == "200"]
        ranged = [t for _, status, t in lines if status == "206"]
        r = summarize(full, work / f"{name}-{slug}", site.truth)
        r["ranged_gets"] = len(ranged)
        r["requests_all"] = len(lines)
        r["bytes"] = sum((root / t.split("?")[0].lstrip("/")).stat().st_size for t in full
                         if (root / t.split("?")[0].lstrip("/")).is_file())
        r["bytes_ranged"] = len(ranged) * CONFIRM  # (every page of the site is longer than a range)
        r["false_confirmations"] = r["wrong"] if ranged else None  # (an avoided URL whose file differs)
        r["traps"] = len(site.traps)
        r["traps_lost"] = sorted(set(site.traps) - set(full))
        if mode in (JOBDIR, KILLED):
            r["kills"] = r_kills
        # (why: the rules retired, and the confirmation's counts, from the crawl's log)
        r["rules_retired"] = sorted(set(re.findall(r"URL rule retired: (prefix \S+ \S+ \S+)", text)))
        r["rule_stats"] = rule_stats(text)
        results[mode] = r
        print(name, mode, {k: v for k, v in r.items() if k != "content_set"}, flush=True)
    row = compare(name, results)
    for mode in results:
        if mode != "plain":
            row[mode]["bytes_vs_plain"] = round((results[mode]["bytes"] + results[mode]["bytes_ranged"])
                                                / results["plain"]["bytes"], 3)
            row[mode]["requests_vs_plain"] = round(results[mode]["requests_all"] / results["plain"]["requests_all"], 3)
    return row


def shared_crawls(url: str, outs: list[Path], redis_url: str, settings: list[str], timeout: float = 1800) -> list[int]:
    """A ``scrapy crawl site`` per directory of ``outs`` (its ``JOBDIR`` ``out/job``, its log
    ``out/crawl.log``), all sharing ``redis_url`` (``SharedCrawlAddon``: frontier, store and rule
    book), one request at a time each, started at once and run to their end (killed past
    ``timeout`` s); their exit codes."""
    addons = {"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.SharedCrawlAddon": 0}
    procs: list[subprocess.Popen] = []
    try:
        for out in outs:
            cmd = crawl_cmd(url, out, 1, [f"ADDONS={json.dumps(addons)}", f"REDIS_URL={redis_url}",
                                          f"JOBDIR={out / 'job'}", "NEARDUP_FRONTIER_LEASE=5",
                                          "ROBOTSTXT_OBEY=False", *settings])
            cmd[1:1] = ["-W", "error::DeprecationWarning"]
            with open(out / "crawl.log", "w") as fh:
                procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=fh))
        return [proc.wait(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()


def shared_mirror_site(work: Path, processes: int = 2, name: str = "mirror-shared") -> dict:
    """The language mirror (``mirror_site``'s) crawled by ``processes`` crawls sharing one
    ``redis-server`` (the shared frontier, store and rule book: ``SharedCrawlAddon``), one request at
    a time each, beside plain Scrapy. scrapy-redis's queue hands requests out in the order of their
    encoded bytes (equal priorities), not in the order they were found: a language's ``api/`` pages
    come before its front page. The figures are the whole run's, from nginx's log; ``contents_lost``:
    distinct files never downloaded whole."""
    from tests.fixtures.mirror_site import MirrorSite

    site = MirrorSite()
    root = work / f"{name}-site"
    site.build(root)
    results = {}
    for mode in ("plain", "rules"):
        port, rport = free_port(), free_port()
        log = work / f"{name}-{mode}.log"
        nginx = start_nginx(root, port, _fresh(work / f"{name}-nginx-{mode}"), log)
        redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no"], stdout=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        outs = [_fresh(work / f"{name}-{mode}-p{i}") for i in range(processes)]
        logs = [out / "crawl.log" for out in outs]
        try:
            time.sleep(0.5)
            shared_crawls(",".join(base + p for p in site.starts()), outs, f"redis://127.0.0.1:{rport}/0", MODES[mode])
        finally:
            nginx.terminate()
            nginx.wait(10)
            redis.terminate()
            redis.wait(10)
        lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
        full = [t for _, status, t in lines if status == "200"]
        # (the duplicates files are the processes' own, under their JOBDIRs: the figures are nginx's)
        r = summarize(full, work / f"{name}-{mode}-none", site.truth)
        texts = [f.read_text(errors="replace") for f in logs]
        r |= {"requests_all": len(lines), "ranged_gets": len(lines) - len(full),
              "traps_lost": sorted(set(site.traps) - set(full)),
              "rule_stats": dict(sum((Counter(rule_stats(t)) for t in texts), Counter()))}
        results[mode] = r
        print(name, mode, {k: v for k, v in r.items() if k != "content_set"}, flush=True)
    row = compare(name, results)
    row["rules"]["requests_vs_plain"] = round(results["rules"]["requests_all"] / results["plain"]["requests_all"], 3)
    return row


#: sites of ``bench/other_mirrors/docsite.py`` (a generator written apart from the fixtures): its arguments, and
#: whether nginx serves them with gzip on; crawled from the start pages named
OTHER_MIRRORS = {
    "other-symlinks": (["--seed", "11", "--store", "symlink"], False, ["/en/", "/de/", "/ja/"]),
    "other-copies": (["--seed", "11", "--store", "copy"], False, ["/en/", "/de/", "/ja/"]),
    "other-header": (["--seed", "33", "--store", "symlink", "--switcher", "header"], False, ["/en/", "/de/", "/ja/"]),
    "other-no-traps": (["--seed", "11", "--store", "symlink", "--traps", ""], False, ["/en/", "/de/", "/ja/"]),
    "other-versions": (["--layout", "sphinx", "--mode", "version", "--seed", "66", "--switcher", "footer",
                        "--v2-change", "0.05", "--v1-change", "0.08"], False, ["/v3/"]),
    "other-symlinks-gzip": (["--seed", "11", "--store", "symlink"], True, ["/en/", "/de/", "/ja/"]),
    "other-copies-gzip": (["--seed", "11", "--store", "copy"], True, ["/en/", "/de/", "/ja/"]),
    # (MkDocs: a directory a page, the whole site's navigation in each, 13-22 kB of which 2 kB are text)
    "other-mkdocs": (["--layout", "mkdocs", "--seed", "25", "--store", "symlink"], False, ["/en/", "/de/", "/ja/"]),
    "other-mkdocs-gzip": (["--layout", "mkdocs", "--seed", "25", "--store", "symlink"], True, ["/en/", "/de/", "/ja/"]),
    # (the same in three languages: the test of requests waiting for the verdicts above them)
    "other-mkdocs-3": (["--layout", "mkdocs", "--seed", "25", "--store", "symlink", "--langs", "en,de,ja"], False,
                       ["/en/", "/de/", "/ja/"]),
}


def other_mirror_site(work: Path, name: str) -> dict:
    """A site of ``OTHER_MIRRORS`` (Sphinx-like trees of 10 languages with 5-20% of each translated, planted
    traps of their copy's length differing in their head, tail, middle or whole; or versions), served by
    nginx, crawled by plain Scrapy and the defaults, depth-first (Scrapy's order), one request at a time.
    A file's bytes are its content (``duplicate_downloads``, ``contents_lost``)."""
    import hashlib

    args, gzip, starts = OTHER_MIRRORS[name]
    root = work / f"{name}-site"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([sys.executable, str(ROOT / "bench" / "other_mirrors" / "docsite.py"), "--out", str(root), *args],
                   check=True, capture_output=True)
    served = root / "www"

    def truth(target: str) -> str | None:
        path = served / target.split("?", 1)[0].lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        return hashlib.md5(path.read_bytes()).hexdigest() if path.is_file() else None

    results = {}
    for mode in ("plain", "rules"):
        port = free_port()
        log = work / f"{name}-{mode}.log"
        nginx = start_nginx(served, port, _fresh(work / f"{name}-nginx-{mode}"), log,
                            "$msec $status $request_uri $body_bytes_sent", gzip=gzip)
        try:
            log_text = run_crawl(",".join(f"http://127.0.0.1:{port}{s}index.html" for s in starts),
                                 work / f"{name}-{mode}", MODES[mode])
        finally:
            nginx.terminate()
            nginx.wait(10)
        lines = [line.split(" ") for line in log.read_text().splitlines()]
        full = [t for _, status, t, _ in lines if status == "200" and t != "/robots.txt"]
        r = summarize(full, work / f"{name}-{mode}", truth)
        r["requests_all"] = len(lines)
        r["ranged_gets"] = sum(status == "206" for _, status, _, _ in lines)
        r["bytes"] = sum(int(sent) for *_, sent in lines)
        stats = rule_stats(log_text)
        for key in ("held", "not_held", "held_too_long"):  # (requests that waited for the verdicts above them)
            r[key] = stats.get(key, 0)
        results[mode] = r
        print(name, mode, {k: v for k, v in r.items() if k not in ("content_set", "wrong_examples")}, flush=True)
    row = compare(name, results)
    row["rules"]["bytes_vs_plain"] = round(results["rules"]["bytes"] / results["plain"]["bytes"], 3)
    row["rules"]["requests_vs_plain"] = round(results["rules"]["requests_all"] / results["plain"]["requests_all"], 3)
    return row


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _target(url: str) -> str:
    p = urlsplit(url)
    return (p.path or "/") + (f"?{p.query}" if p.query else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", default="bench/results/url_rules.json")
    ap.add_argument("--sites", default="trap,changing,shop,shop-one-page,shop-two-pages,copies,demo,sqlite3-doc,developers-reference,debian-reference")
    ap.add_argument("--mirror-modes", default="", help="the mirror site's crawls besides plain Scrapy "
                    f"(of: no rules, rules, rules without sub-trees, rules+3pairs, {JOBDIR}, {KILLED}; default all)")
    ap.add_argument("--kills", type=int, default=3, help=f"the mirror's {KILLED!r} mode: kills before it finishes")
    ap.add_argument("--seed", type=int, default=1, help=f"the mirror's {KILLED!r} mode: the seed of its kill moments")
    ap.add_argument("--concurrency", type=int, default=1, help="requests at once in each crawl of the other mirrors "
                    "(1: depth-first, one after the other, the same order in every run; 16: Scrapy's default)")
    ap.add_argument("--setting", action="append", default=[], help="NAME=VALUE, a Scrapy setting added to every "
                    "crawl (after the benchmark's own: DOWNLOAD_DELAY=0.1, CONCURRENT_REQUESTS_PER_DOMAIN=1)")
    a = ap.parse_args()
    global CONCURRENCY
    CONCURRENCY = a.concurrency
    EXTRA.extend(a.setting)
    work = Path(tempfile.mkdtemp(prefix="neardup-rules-bench-"))
    work.chmod(0o755)  # nginx's workers run unprivileged and must read the sites
    rows = []
    t = time.perf_counter()
    try:
        sites = a.sites.split(",")
        if "trap" in sites:
            trap = TrapSite()
            rows.append(local_site("trap", trap.page, trap.truth, work, "/"))
        if "changing" in sites:
            site = TrapSite(changing=True)
            rows.append(local_site("changing", site.page, site.truth, work, "/"))
        if "shop" in sites:  # ?page= repeats an article, and lists other products in a category: breadth-first
            shop = ShopSite()
            rows.append(local_site("shop", shop.page, shop.truth, work, "/", BREADTH_FIRST))
        if "shop-one-page" in sites:  # and 10 one-page categories whose ?page=2 repeats page 1, met first
            shop = ShopSite(categories=16, one_page=10)
            rows.append(local_site("shop-one-page", shop.page, shop.truth, work, "/", BREADTH_FIRST))
        if "shop-two-pages" in sites:  # the same, its other categories of 2 pages: ?page=2 alone (a known limit)
            shop = ShopSite(categories=16, one_page=10, pages=2)
            rows.append(local_site("shop-two-pages", shop.page, shop.truth, work, "/", BREADTH_FIRST))
        if "copies" in sites:  # session ids, mobile and print copies; sid stops holding on some pages
            copies = CopiesSite()
            rows.append(local_site("copies", copies.page, copies.truth, work, "/"))
        if "demo" in sites:
            demo = DemoSite()
            dropped = demo.expected_dropped()

            def respond(target: str) -> tuple[int, dict[str, str], bytes]:
                from urllib.parse import parse_qs
                p = urlsplit(target)
                status, ctype, body = demo.page(p.path, parse_qs(p.query))
                return status, {"Content-Type": ctype}, body

            rows.append(local_site("demo", respond, lambda t: dropped.get(t, t), work, "/"))
        if "mirror" in sites:  # language folders of symlinks, partly translated, with validator traps
            # ("rules": the defaults, sub-tree rules confirmed by a ranged GET of CONFIRM bytes;
            # "rules without sub-trees": without confirmation, as before it was the default)
            modes = {**MODES, "rules without sub-trees": ["NEARDUP_URL_RULES_CONFIRM_BYTES=0"],
                     "rules+3pairs": [f"NEARDUP_URL_RULES_CONFIRM_BYTES={CONFIRM}", "NEARDUP_URL_RULES_MIN_EVIDENCE=3"],
                     JOBDIR: [], KILLED: []}
            if a.mirror_modes:
                modes = {m: modes[m] for m in ["plain", *a.mirror_modes.split(",")]}
            rows.append(mirror_site(work, modes, a.kills, a.seed))
        if "mirror-gzip" in sites:  # the same, served with gzip on (Debian's stock nginx): plain Scrapy and the defaults
            rows.append(mirror_site(work, {"plain": MODES["plain"], "rules": MODES["rules"]}, name="mirror-gzip",
                                    gzip=True))
        if "mirror-files" in sites:  # the same, each copy a file of its own, each folder with its own mtime
            # (versioned trees: a copy's ETag is not its page's; plain Scrapy and the defaults)
            rows.append(mirror_site(work, {"plain": MODES["plain"], "rules": MODES["rules"]}, name="mirror-files",
                                    linked=False))
        for name, linked in (("mirror-partly", True), ("mirror-partly-files", False)):
            if name in sites:  # the same, with 8 pages of each section translated in each language, at other
                # places in each (a third of every folder); "-files": each copy a file of its own
                rows.append(mirror_site(work, {"plain": MODES["plain"], "rules": MODES["rules"]}, name=name,
                                        linked=linked, scattered=8, scatter_in=("guide", "api", "faq")))
        for name in OTHER_MIRRORS:
            if name in sites or ("other" in sites and not name.endswith("-gzip")):
                rows.append(other_mirror_site(work, name))
        if "mirror-shared" in sites:  # the mirror by two processes sharing Redis (frontier, store, rule book)
            rows.append(shared_mirror_site(work))
        if "sqlite3-doc" in sites:
            rows.append(static_site(a.data, "sqlite3-doc", ["/index.html"], work))
        if "developers-reference" in sites:  # mirrored language trees, partly translated
            rows.append(static_site(a.data, "developers-reference",
                                    ["/index.html"] + [f"/{lang}/index.html" for lang in ("de", "fr", "ja", "ru")], work))
        if "debian-reference" in sites:  # one folder, a file per chapter and language
            rows.append(static_site(a.data, "debian-reference",
                                    [f"/index.{lang}.html" for lang in ("en", "de", "fr", "it", "ja", "zh-cn")], work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"command": "bench/url_rules_bench.py " + " ".join(sys.argv[1:]), "seconds": time.perf_counter() - t,
              "sites": rows}
    print(json.dumps(rows, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
