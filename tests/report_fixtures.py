"""Crawl directories for the report's tests and benchmark, written as a crawl writes them."""

from __future__ import annotations

import json
import random
import sqlite3
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

from scrapy_neardup.crawler.filter.captured_text import FILENAME as CAPTURED
from scrapy_neardup.crawler.index import PageIndex, PageRow
from scrapy_neardup.crawler.url_rules.storage import SqliteStorage

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)


def synthetic_crawl(out: Path, pages: int, *, seed: int = 7, hostile: bool = False, index_text: bool = True) -> Path:
    """A ``neardup crawl --out`` directory of ``pages`` fetched pages: 70% kept, 25% dropped as
    near-duplicates of them (clusters of very unequal size), 5% avoided by two URL rules; two runs
    (a killed one and its resume); the dropped pages' text captured. ``hostile``: titles, URLs and
    text carry markup and script."""
    rnd = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "store"
    store.mkdir(exist_ok=True)
    (out / "job" / "neardup").mkdir(parents=True, exist_ok=True)
    bad = '<script>window.__pwned=1</script></script><img src=x onerror="window.__pwned=2">' if hostile else ""
    hosts = [f"site{i}.example" for i in range(40)] + ['evil.example"><script>window.__pwned=3</script>']
    sections = ["docs", "news", "blog", "releases", "api", "tag", "print", "archive"]
    langs = ["en"] * 8 + ["de", "fr", "zh", "ja", "und"]
    kept_n = int(pages * 0.70)
    kept_urls = []
    rows = []
    for i in range(kept_n):
        host = rnd.choice(hosts[:40]) if not hostile or i % 5 else hosts[40]
        url = f"https://{host}/{rnd.choice(sections)}/page-{i}.html"
        if hostile and i % 7 == 0:
            url = f"javascript:window.__pwned=4//{i}"
        kept_urls.append(url)
        text = "\n".join(f"Line {j} of page {i} says something about topic {i % 97}. {bad}" for j in range(6))
        rows.append(PageRow(url, f"Page {i} {bad}", text if index_text else "", f"{rnd.getrandbits(64):016x}",
                            (T0 + timedelta(seconds=i * 0.05)).isoformat(), 200, rnd.choice(langs)))
    index = PageIndex(out / "index.sqlite3")
    index.db.execute("PRAGMA synchronous=OFF")
    for i in range(0, len(rows), 5000):
        # (the full-text table is not what the report reads: only the pages table is filled)
        with index.db:
            index.db.executemany("INSERT OR REPLACE INTO pages (url, title, text, language, fingerprint, "
                                 "fetched_at, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 [(p.url, p.title, p.text, p.language, p.fingerprint, p.fetched_at, p.status)
                                  for p in rows[i:i + 5000]])
    index.close()
    weights = [1.0 / (r + 1) ** 1.1 for r in range(len(kept_urls))]
    dropped_n, avoided_n = int(pages * 0.25), pages - kept_n - int(pages * 0.25)
    twins = rnd.choices(range(len(kept_urls)), weights=weights, k=dropped_n)
    captured = sqlite3.connect(store / CAPTURED)
    captured.execute("CREATE TABLE dropped_text (url TEXT PRIMARY KEY, text BLOB NOT NULL)")
    with open(store / "duplicates.jsonl", "w", encoding="utf-8") as fh:
        for n, t in enumerate(twins):
            twin = kept_urls[t]
            url = twin.replace(".html", f".html?print={n}") if n % 3 else twin.replace("/page-", f"/copy{n}/page-")
            fh.write(json.dumps({"url": url, "duplicate_of": twin, "distance": rnd.choice([0, 0, 1, 1, 2, 3]),
                                 "fingerprint": "5c1e000000000000", "duplicate_of_fingerprint": "5c1f000000000000",
                                 "referer": twin, "time": (T0 + timedelta(seconds=n * 0.2)).isoformat()}) + "\n")
            if n < 2000:
                text = rows[t].text.replace("Line 3", f"Line 3 (printed {n}) {bad}")
                captured.execute("INSERT OR IGNORE INTO dropped_text VALUES (?, ?)",
                                 (url, zlib.compress(text.encode())))
        for n in range(avoided_n):
            twin = kept_urls[n % len(kept_urls)]
            fh.write(json.dumps({"url": twin + f"?sid={n}", "duplicate_of": twin, "avoided": True,
                                 "rule": f"param {twin.split('/')[2]} sid" if n % 2 else "suffix h /index.html /",
                                 "referer": twin, "time": (T0 + timedelta(seconds=n)).isoformat()}) + "\n")
        fh.write('{"url": "cut short by a kill", "dupl')
    captured.commit()
    captured.close()
    book = SqliteStorage(store / "url_rules.sqlite3")
    for spec, host in (("param site1.example sid", "site1.example"), ("suffix site2.example /index.html /",
                                                                      "site2.example")):
        book.create(spec, host)
        book.bump(spec, example=f"https://{host}/a?sid=1 {bad}", evidence=25, avoided=avoided_n // 2)
    book.create("param site3.example ref", "site3.example")
    book.bump("param site3.example ref", counter_example=f"javascript:alert(1)//{bad}", evidence=4, counter=1)
    book.save_settings({"min_evidence": "10"})
    book.close()
    runs = [{"event": "start", "time": T0.isoformat(), "resume": False, "fingerprints": 0, "redelivered": 0},
            {"event": "start", "time": (T0 + timedelta(hours=1)).isoformat(), "resume": True,
             "fingerprints": kept_n // 2, "redelivered": 16},
            {"event": "close", "time": (T0 + timedelta(hours=2)).isoformat(), "reason": "finished",
             "fetched": pages, "kept": kept_n // 2, "dropped": dropped_n // 2, "bytes_downloaded": pages * 21000}]
    (out / "job" / "neardup" / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return out


def dedup_output(out: Path) -> Path:
    """A small ``neardup dedup`` output directory: unique.jsonl, duplicates.jsonl, summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"documents": 6, "unique": 3, "duplicates": 3, "max_distance": 3,
                                                  "source": "<b>docs.jsonl</b>"}))
    (out / "unique.jsonl").write_text("".join(json.dumps({"id": f"doc-{i}", "text": "x"}) + "\n" for i in range(3)))
    lines = [{"id": "doc-3", "duplicate_of": "doc-0", "distance": 1, "fingerprint": "00000000000000ff",
              "duplicate_of_fingerprint": "00000000000000fe", "source": "docs.jsonl"},
             {"id": "https://a.example/x?p=1", "duplicate_of": "https://a.example/x", "distance": 0,
              "fingerprint": "0000000000000001", "duplicate_of_fingerprint": "0000000000000001", "source": "web.jsonl"},
             {"id": "doc-5", "duplicate_of": "doc-0", "distance": 3, "fingerprint": "00000000000000f0",
              "duplicate_of_fingerprint": "00000000000000fe", "source": "docs.jsonl"}]
    (out / "duplicates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return out


#: What a hostile page puts everywhere: each would set window.__pwned if it ran
EVIL = ('<script>window.__pwned="script"</script></script><img src=x onerror="window.__pwned=\'onerror\'">'
        '<svg onload="window.__pwned=\'svg\'"></svg>')
#: The same as text: markup written as entities is a page's visible text, which the report must escape
EVIL_TEXT = "&lt;script&gt;window.__pwned=&quot;text&quot;&lt;/script&gt; &lt;b onclick=alert(1)&gt;bold&lt;/b&gt;"
VOCABULARY = [f"{a}{b}" for a in ("kal", "mor", "tes", "vin", "dar", "lop", "sun", "rek", "fip", "gor")
              for b in ("ano", "ebi", "ulo", "ira", "osa", "enk", "apt", "yud", "ith", "omb")]


def _text(seed: int, changed: str = "") -> str:
    rnd = random.Random(seed)
    lines = [" ".join(rnd.choice(VOCABULARY) for _ in range(12)) for _ in range(8)]
    if changed:
        lines[3] = changed
    return "".join(f"<p>{line}</p>" for line in lines)


def hostile_site(target: str) -> tuple[int, dict[str, str], bytes]:
    """Pages whose titles, URLs and text carry markup, script and javascript: links; /b-copy... pages are
    near-duplicates of /b.html, with one line changed into script."""
    path = target.split("?")[0]
    title = f"<title>{EVIL} {path}</title>"
    links = ('<a href="/b.html">b</a> <a href="javascript:window.__pwned=\'link\'">js</a> '
             + " ".join(f'<a href="/b-copy-{i}.html?q=%3Cscript%3Ewindow.__pwned=1%3C/script%3E&x=&quot;'
                        f'onmouseover=alert(1)">copy {i}</a>' for i in range(4))
             + ' <a href="/%22%3E%3Cscript%3Ewindow.__pwned=2%3C/script%3E.html">evil path</a>')
    if path in ("/", "/index.html"):
        body = _text(1) + links
    elif path.startswith("/b-copy-"):
        body = _text(5, changed=f"a changed line {EVIL_TEXT} {EVIL} {path}")
    elif path == "/b.html":
        body = _text(5)
    else:
        body = _text(11) + f"<p>{EVIL} {EVIL_TEXT}</p>"
    html = f"<!DOCTYPE html><html><head>{title}</head><body>{body}</body></html>"
    return 200, {"Content-Type": "text/html; charset=utf-8"}, html.encode()
