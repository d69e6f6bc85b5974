"""Crawl throughput with and without the near-duplicate filter, on a real site served by nginx.

    .venv/bin/python bench/crawl_bench.py [--rounds 7] [--spiders ready,user,jobdir] [--outlink-site [--pages 2000]]
                                          [--profile DIR] [--series DIR]

Serves ``../shared/data/sites/sqlite3-doc.tar.gz`` (or, with ``--outlink-site``,
a generated static site of ``--pages`` pages of 100 outlinks each, a third of
them near-duplicates: ``generate_outlink_site``; results to
``bench/results/crawl-outlinks.json``) with nginx (installed from
Debian's packages if missing) on a free 127.0.0.1 port, then, for each
spider, runs its crawl without and with the filter in alternating order
(plain first in even rounds, filtered first in odd ones), at the same
concurrency, AutoThrottle off. The spiders:

* ``ready``: ``scrapy crawl site`` (without the filter it extracts each
  page's title and text itself, so that both crawls give the same items);
* ``user``: ``scrapy runspider bench/link_spider.py``, a user-style spider
  that follows links with its own ``LinkExtractor`` and yields ``{url, title}``;
* ``jobdir``: the ready spider with ``JOBDIR`` (Scrapy's disk queues without
  the filter, the durable frontier with it).

Results go to ``bench/results/crawl.json`` (``crawl-outlinks.json``), or with
``--spiders`` naming a subset, to a file named after it (``crawl-user.json``)
unless ``--out`` says otherwise.

Reports per spider the median of the per-round ratios (filtered / plain) of
pages/s (``response_received_count / elapsed_time_seconds``) and of the
whole command's wall time, with their spread (min and max), and the crawl's
thread CPU per response (``bench/thread_cpu.py``: ``time.thread_time`` read
in the reactor's thread) with and without the filter, and their difference:
what the filter costs that thread per response, over the whole crawl and past
its first 300 responses (``_after_start``: the worker's start, the warm-up and
the garbage collector's freezes fall before). For the ready spider, pages
kept and dropped, and for every dropped pair the word-5-shingle Jaccard of
the two pages' visible text (how many below 0.5).

``--profile DIR``: each crawl also profiles the crawl's thread (cProfile in
the reactor's thread, ``bench/thread_cpu.py``) into
``DIR/SPIDER-MODE-ROUND.prof``, with its stats beside it (``.json``); compare
a plain and a filtered one with ``bench/thread_profile.py``. The profiler
slows that thread down: such a run's ratios and thread CPU are not the
benchmark's.

``--series DIR``: each crawl also writes its thread's CPU and wall seconds at
every 250th response to ``DIR/SPIDER-MODE-ROUND.series.json``
(``bench/thread_cpu.py``): whether a response costs more as the crawl goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from scrapy_neardup.dedup.text import extract  # noqa: E402
from quality import jaccard, shingles  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root: Path, port: int, work: Path, access_log: Path | None = None,
                log_format: str = "$msec $status $request_uri", gzip: bool = False,
                server: str = "") -> subprocess.Popen:
    """nginx serving ``root`` on 127.0.0.1:``port``; ``access_log``: one line per
    request, its time in seconds with milliseconds (``$msec``), as ``log_format`` says;
    ``gzip``: HTML compressed for a client that accepts it (Debian's stock config);
    ``server``: more directives of the server block (``max_ranges 1;``)."""
    if not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists():
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "nginx-light"], check=True)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    conf = work / "nginx.conf"
    conf.write_text(f"""
worker_processes 2;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    log_format times '{log_format}';
    access_log {f"{access_log} times" if access_log else "off"};
    client_body_temp_path {work}/tmp; proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp;
    uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
    gzip {"on" if gzip else "off"};
    server {{ listen 127.0.0.1:{port}; root {root}; {server} }}
}}
""")
    (work / "tmp").mkdir(exist_ok=True)
    proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(work)])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("nginx did not start")


def crawl_cmd(url: str, out: Path, concurrency: int, settings: list[str]) -> list[str]:
    """The ``scrapy crawl site`` command of ``crawl`` (items to ``out/pages.jsonl``)."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={url}", "-O", str(out / "pages.jsonl")]
    for s in ["AUTOTHROTTLE_ENABLED=False", f"CONCURRENT_REQUESTS={concurrency}",
              f"CONCURRENT_REQUESTS_PER_DOMAIN={concurrency}", "LOG_LEVEL=INFO", *settings]:
        cmd += ["-s", s]
    return cmd


def read_stats(stderr: str, wall: float, min_pages: int = 100) -> dict:
    """A finished crawl's stats from its log, with its wall time and pages/s.
    Raises unless it finished with ``min_pages`` pages or more."""
    if "'finish_reason': 'finished'" not in stderr:
        raise RuntimeError(stderr[-2000:])
    stats = {}
    for key in ("response_received_count", "elapsed_time_seconds", "neardup/kept", "neardup/dropped",
                "neardup/outlinks_dropped", "downloader/response_bytes", "bench/thread_cpu_s", "bench/process_cpu_s", "bench/gc_cpu_s",
                "bench/thread_cpu_after_start_s", "bench/responses_after_start",
                "bench/gc_full_collections", "bench/gc_objects", *(f"bench/gc_gen{g}_{what}" for g in range(3)
                                                                   for what in ("collections", "s")),
                "neardup/fingerprinted_while_workers_start", "neardup/links/from_worker", "neardup/links/in_thread"):
        for line in stderr.splitlines():
            if f"'{key}':" in line:
                stats[key] = float(line.split(":")[-1].strip(" ,}"))
    for line in stderr.splitlines():  # (each live thread's CPU: ``thread_cpu._threads_cpu``)
        if "'bench/thread_cpu_s/" in line:
            key, _, value = line.strip(" {},").partition("':")
            stats[key.strip("'")] = float(value.strip(" ,}"))
    ok = sum(float(line.split(":")[-1].strip(" ,}")) for line in stderr.splitlines()
             if "'downloader/response_status_count/200':" in line)
    if ok < min_pages:
        raise RuntimeError(f"only {ok} pages answered 200: is the site served? {stderr[-1500:]}")
    stats["wall_s"] = wall
    stats["pages_per_s"] = stats["response_received_count"] / stats["elapsed_time_seconds"]
    if "bench/thread_cpu_s" in stats:
        stats["thread_cpu_ms_per_response"] = 1000 * stats["bench/thread_cpu_s"] / stats["response_received_count"]
    if stats.get("bench/responses_after_start"):  # (past the crawl's start: thread_cpu.START_RESPONSES)
        stats["thread_cpu_ms_per_response_after_start"] = \
            1000 * stats["bench/thread_cpu_after_start_s"] / stats["bench/responses_after_start"]
    return stats


def crawl(url: str, out: Path, concurrency: int, settings: list[str]) -> dict:
    """A ``scrapy crawl site`` of ``url`` (AutoThrottle off, ``concurrency`` requests,
    items to ``out/pages.jsonl``) with ``settings`` (NAME=VALUE); its stats, wall
    time and pages/s. Raises unless it finished with 100 pages or more."""
    return run(crawl_cmd(url, out, concurrency, settings))


def crawl_args(out: str, rounds: int = 2, **more: int) -> argparse.Namespace:
    """The crawl benchmarks' command line: --data, --rounds, --concurrency, --out,
    and an integer option for each of ``more`` (name=default)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", default=out)
    for name, default in more.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    return ap.parse_args()


def serve_sqlite_doc(data: str, prefix: str, access_log: bool = False
                     ) -> tuple[Path, Path, int, subprocess.Popen]:
    """(work directory, site root, port, nginx) with sqlite3-doc unpacked in a
    new temporary directory and served on 127.0.0.1; with ``access_log``, to
    ``work/access.log``."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    work.chmod(0o755)  # nginx's workers run unprivileged and must read the site
    with tarfile.open(Path(data) / "sites" / "sqlite3-doc.tar.gz") as tf:
        tf.extractall(work / "site", filter="data")
    site = work / "site" / "sqlite3-doc" / "site"
    port = free_port()
    return work, site, port, start_nginx(site, port, work, work / "access.log" if access_log else None)


def generate_outlink_site(root: Path, pages: int = 2000, outlinks: int = 100, seed: int = 1) -> None:
    """A static site of ``pages`` pages under ``root`` (``index.html`` and
    ``p/N.html``), each with ``outlinks`` links to other pages (a few fixed
    navigation links, the rest drawn at random, relative and absolute paths, some
    with a #fragment) and an article of made-up words; every third page is a
    near-duplicate of the page before it (the same article, another date line
    and view counter), as template sites have them."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("aeioukltmnrsdpbg") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    (root / "p").mkdir(parents=True, exist_ok=True)
    article = ""
    for i in range(pages):
        if i % 3 != 2:
            article = "\n".join("<p>" + " ".join(rng.choice(vocab) for _ in range(rng.randint(40, 90))) + ".</p>"
                                for _ in range(rng.randint(4, 8)))
        targets = [(i * 7 + k) % pages for k in range(1, 11)] + [rng.randrange(pages) for _ in range(outlinks - 10)]
        links = "\n".join(f'<li><a href="{"/p/" if k % 2 else "../p/"}{t}.html{"#c" if k % 10 == 3 else ""}">'
                          f'{rng.choice(vocab)} {rng.choice(vocab)}</a></li>' for k, t in enumerate(targets))
        html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Page {i} of the site</title></head><body>"
                f"<nav><ul>{links}</ul></nav><main><h1>Article {i - (i % 3 == 2)}</h1>"
                f"<p class='date'>Updated 2026-0{1 + i % 9}-1{i % 10} at {rng.randrange(24)}:00, "
                f"{rng.randrange(10_000)} views</p>{article}</main><footer>The generated site</footer></body></html>")
        (root / "p" / f"{i}.html").write_text(html)
    index = "".join(f'<a href="p/{i}.html">{i}</a> ' for i in range(0, pages, 50))
    (root / "index.html").write_text(f"<html><body>{index}</body></html>")


def serve_outlink_site(prefix: str, pages: int) -> tuple[Path, Path, int, subprocess.Popen]:
    """(work directory, site root, port, nginx) with ``generate_outlink_site`` served on 127.0.0.1."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    work.chmod(0o755)
    site = work / "site"
    generate_outlink_site(site, pages)
    port = free_port()
    return work, site, port, start_nginx(site, port, work)


def finish(result: dict, out: str, work: Path) -> None:
    """Print the result (without its runs), write it all to ``out``, remove ``work``."""
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1))
    shutil.rmtree(work, ignore_errors=True)


SPIDERS = ("ready", "user", "jobdir")
THREAD_CPU = 'EXTENSIONS={"bench.thread_cpu.ThreadCpu": 0}'


def spider_cmd(spider: str, url: str, out: Path, concurrency: int, settings: list[str]) -> list[str]:
    """The command of one crawl of ``spider`` (``SPIDERS``)."""
    settings = [THREAD_CPU, *settings]
    if spider == "jobdir":
        settings.append(f"JOBDIR={out / 'job'}")
    cmd = crawl_cmd(url, out, concurrency, settings)
    if spider == "user":  # (the same options, another spider)
        cmd[3:5] = ["runspider", str(ROOT / "bench" / "link_spider.py")]
    return cmd


def run(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """One crawl's stats (``read_stats``), its command run in ``env`` (None: this process's)."""
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env)
    wall = time.perf_counter() - t
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return read_stats(r.stderr, wall)


def spread(values: list[float], digits: int = 3) -> dict:
    """Median, min and max."""
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def summary(rounds: list[dict]) -> dict:
    """One spider's rounds, summed up (see the module docstring)."""
    def per_round(key: str) -> list[float]:
        return [r["filtered"][key] / r["plain"][key] for r in rounds]

    plain_cpu = [r["plain"]["thread_cpu_ms_per_response"] for r in rounds]
    filtered_cpu = [r["filtered"]["thread_cpu_ms_per_response"] for r in rounds]
    return {
        "rounds": len(rounds),
        "pages_per_s_ratio": spread(per_round("pages_per_s")),
        "wall_ratio": spread(per_round("wall_s")),
        "plain_pages_per_s": spread([r["plain"]["pages_per_s"] for r in rounds], 1),
        "filtered_pages_per_s": spread([r["filtered"]["pages_per_s"] for r in rounds], 1),
        "plain_wall_s": spread([r["plain"]["wall_s"] for r in rounds], 1),
        "filtered_wall_s": spread([r["filtered"]["wall_s"] for r in rounds], 1),
        "thread_cpu_ms_per_response_plain": spread(plain_cpu),
        "thread_cpu_ms_per_response_filtered": spread(filtered_cpu),
        "filter_thread_cpu_ms_per_response": spread([f - p for f, p in zip(filtered_cpu, plain_cpu)]),
        **after_start(rounds),
        # (the reactor thread's CPU in full garbage collections, ms a response: ``bench/thread_cpu.py``)
        **{f"gc_full_ms_per_response_{mode}": spread([1000 * r[mode]["bench/gc_gen2_s"] / r[mode]["response_received_count"]
                                                      for r in rounds]) for mode in ("plain", "filtered")},
    }


def after_start(rounds: list[dict]) -> dict:
    """The thread CPU per response past the crawl's start (``thread_cpu.START_RESPONSES``), plain,
    filtered and their difference per round; nothing for crawls shorter than the start."""
    if not all("thread_cpu_ms_per_response_after_start" in r[mode] for r in rounds for mode in ("plain", "filtered")):
        return {}
    plain, filtered = ([r[mode]["thread_cpu_ms_per_response_after_start"] for r in rounds] for mode in ("plain", "filtered"))
    return {"thread_cpu_ms_per_response_after_start_plain": spread(plain),
            "thread_cpu_ms_per_response_after_start_filtered": spread(filtered),
            "filter_thread_cpu_ms_per_response_after_start": spread([f - p for f, p in zip(filtered, plain)])}


def directory_option(name: str) -> Path | None:
    """The directory given as ``name DIR`` on the command line (made, and the
    option taken out of ``sys.argv``), or None."""
    if name not in sys.argv:
        return None
    i = sys.argv.index(name)
    path = Path(sys.argv[i + 1]).resolve()
    path.mkdir(parents=True, exist_ok=True)
    del sys.argv[i : i + 2]
    return path


def main() -> None:
    command = " ".join(["bench/crawl_bench.py", *sys.argv[1:]])
    spiders = SPIDERS
    if "--spiders" in sys.argv:  # (crawl_args knows integer options only)
        i = sys.argv.index("--spiders")
        spiders = tuple(sys.argv[i + 1].split(","))
        del sys.argv[i : i + 2]
    series = directory_option("--series")
    profile = directory_option("--profile")
    outlink_site = "--outlink-site" in sys.argv
    if outlink_site:
        sys.argv.remove("--outlink-site")
    # (a subset of the spiders gets a file of its own by default: it must not overwrite the whole run's)
    subset = "" if spiders == SPIDERS else "-" + "-".join(spiders)
    a = crawl_args(f"bench/results/crawl{'-outlinks' if outlink_site else ''}{subset}.json", rounds=7, pages=2000)
    if outlink_site:
        work, site, port, nginx = serve_outlink_site("neardup-crawl-", a.pages)
    else:
        work, site, port, nginx = serve_sqlite_doc(a.data, "neardup-crawl-")
    url = f"http://127.0.0.1:{port}/index.html"
    runs: dict[str, list[dict]] = {s: [] for s in spiders}
    try:
        for i in range(a.rounds):
            for spider in spiders:
                got: dict[str, dict] = {}
                for mode in (("plain", "filtered") if i % 2 == 0 else ("filtered", "plain")):
                    out = work / f"{spider}-{mode}-{i}"
                    shutil.rmtree(out, ignore_errors=True)
                    more = [f"BENCH_PROFILE={profile / f'{spider}-{mode}-{i}.prof'}"] if profile else []
                    if series:
                        more.append(f"BENCH_SERIES={series / f'{spider}-{mode}-{i}.series.json'}")
                    got[mode] = run(spider_cmd(spider, url, out, a.concurrency, [
                        f"NEARDUP_ENABLED={mode == 'filtered'}", f"NEARDUP_STORE={out / 'store'}", "NEARDUP_INDEX=",
                        *more]))
                    if profile:
                        (profile / f"{spider}-{mode}-{i}.json").write_text(json.dumps(got[mode], indent=1))
                    print(spider, i, mode, json.dumps(got[mode]), flush=True)
                runs[spider].append(got)
            # (after each round: a long run cut short still leaves its rounds so far)
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps({"partial": True, "spiders": {s: summary(r) for s, r in runs.items()},
                                               "runs": runs}, indent=1))
    finally:
        nginx.terminate()
        nginx.wait(10)
    result: dict = {"command": command, "concurrency": a.concurrency,
                    "site": f"generated, {a.pages} pages of 100 outlinks" if outlink_site else "sqlite3-doc",
                    "load_average": os.getloadavg(), "spiders": {s: summary(r) for s, r in runs.items()}}
    if "ready" in spiders and not outlink_site:
        # every dropped pair of the ready spider's last filtered run, by Jaccard of visible text
        dups = [json.loads(x) for x in (work / f"ready-filtered-{a.rounds - 1}" / "store" / "duplicates.jsonl"
                                        ).read_text().splitlines()]
        prefix = f"http://127.0.0.1:{port}/"

        def text_of(u: str) -> str:
            path = site / urlsplit(u).path.lstrip("/")
            if path.is_dir():  # nginx serves a directory's index.html
                path = path / "index.html"
            return extract(path.read_bytes()).text

        pairs = [(d["url"], d["duplicate_of"], d["distance"],
                  jaccard(shingles(text_of(d["url"])), shingles(text_of(d["duplicate_of"])))) for d in dups]
        result["dropped_pairs"] = [(u[len(prefix):], v[len(prefix):], d, round(j, 3)) for u, v, d, j in pairs]
        result["dropped_below_0.5"] = sum(j < 0.5 for *_, j in pairs)
    result["runs"] = runs
    finish(result, a.out, work)


if __name__ == "__main__":
    main()
