"""The report as one self-contained HTML file.

Everything is inline: the style sheet, and the plots as ``data:`` URIs of
SVG images. There is no script. The Content-Security-Policy (a ``<meta>``,
``csp``) allows the one inline style sheet by its SHA-256 hash, images
from ``data:`` only, and nothing else: no script, no connection, no frame,
no form, no font, no base URL, so the file fetches nothing and runs nothing
when opened from a mail attachment or an artifact store.

Every string that comes from the crawled pages (URLs, titles, text, hosts,
rules) is escaped (``esc``) and is data, never markup; only ``http`` and
``https`` URLs become links, so a ``javascript:`` URL is shown, not followed.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any
from urllib.parse import urlsplit

from . import plots
from .sources import TOP_ROWS, CrawlData

#: Changed lines shown per pair, and characters per line
DIFF_LINES, LINE_CHARS = 14, 240

STYLE = """
:root { --ink: #1d2433; --muted: #5b6475; --line: #dfe3ea; --kept: #009E73; --dropped: #D55E00; --avoided: #0072B2; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; color: var(--ink);
       margin: 0; background: #f6f7f9; }
header { background: #1d2433; color: #fff; padding: 22px 32px 18px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #c9cfdb; font-size: 13px; overflow-wrap: anywhere; }
main { max-width: 1100px; margin: 0 auto; padding: 8px 24px 40px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
h2 { font-size: 17px; margin: 0 0 10px; }
p.note { color: var(--muted); font-size: 13px; margin: 6px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; margin: 16px 0 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; }
.card b { display: block; font-size: 22px; }
.card span { color: var(--muted); font-size: 13px; }
.card.kept b { color: var(--kept); } .card.dropped b { color: var(--dropped); } .card.avoided b { color: var(--avoided); }
.plots { display: grid; gap: 16px; align-items: start; }
.plots.wide { grid-template-columns: 2fr 1fr; } .plots.two { grid-template-columns: 1fr 1fr; }
.plots.one { grid-template-columns: minmax(0, 560px); }
.plots img { width: 100%; height: auto; }
section > img { max-width: 100%; height: auto; }
@media (max-width: 760px) { .plots.wide, .plots.two { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.u { overflow-wrap: anywhere; } td.k { white-space: nowrap; }
a { color: #0b57a4; }
details { border-top: 1px solid var(--line); padding: 8px 0; }
summary { cursor: pointer; overflow-wrap: anywhere; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; margin: 8px 0 4px; }
.pair > div { overflow-wrap: anywhere; font-size: 13px; }
.pair .lab { color: var(--muted); font-size: 12px; }
pre.diff { background: #f6f7f9; border: 1px solid var(--line); border-radius: 6px; padding: 8px; margin: 4px 0 10px;
           white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
pre.diff .del { color: #9a3412; background: #fde8e1; display: block; }
pre.diff .ins { color: #14532d; background: #e2f5ea; display: block; }
.state { padding: 1px 6px; border-radius: 4px; background: #eef0f4; }
.state.active, .state.pinned { background: #e2f5ea; } .state.retired { background: #fde8e1; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 0 0 24px; }
""".strip()


def csp() -> str:
    """The report's Content-Security-Policy: its own inline style sheet, ``data:`` images, nothing else."""
    digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    return (f"default-src 'none'; style-src 'sha256-{digest}'; img-src data:; script-src 'none'; "
            "base-uri 'none'; form-action 'none'")


def esc(value: Any) -> str:
    """``value`` as text in HTML (attributes too): data, never markup."""
    return escape(str(value), quote=True)


#: a run of percent-escapes
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def readable(text: str) -> str:
    """``text`` (a URL, a path, a rule) with its percent-escaped non-ASCII characters shown as the
    characters, as a browser's address bar shows them: ``/%E6%8C%87%E5%8D%97/`` reads ``/指南/``. An
    escape of an ASCII character (``%2F``, ``%20``), bytes that are not UTF-8 and characters that are not
    printable stay escaped, so nothing reads as another URL. O(len(text)).

    >>> readable("http://h/%E6%8C%87%E5%8D%97/a%20b%2F%FF.html")
    'http://h/指南/a%20b%2F%FF.html'
    """

    def decode(m: re.Match[str]) -> str:
        escaped = m.group(0)
        raw = bytes.fromhex(escaped.replace("%", ""))
        out, i = [], 0
        while i < len(raw):  # (each ASCII byte stays escaped; each run of bytes >= 0x80 is decoded if it can be)
            if raw[i] < 0x80:
                out.append(escaped[3 * i:3 * i + 3])
                i += 1
                continue
            j = i
            while j < len(raw) and raw[j] >= 0x80:
                j += 1
            try:
                chars = raw[i:j].decode("utf-8")
                if not all(c.isprintable() for c in chars):
                    raise ValueError
                out.append(chars)
            except ValueError:
                out.append(escaped[3 * i:3 * j])
            i = j
        return "".join(out)

    return _ESCAPES.sub(decode, text) if "%" in text else text


def link(url: str) -> str:
    """``url`` shown as text (``readable``), a link only when it is http(s)."""
    if urlsplit(url).scheme.lower() in ("http", "https") and not any(c.isspace() for c in url):
        return f'<a href="{esc(url)}" rel="noreferrer noopener">{esc(readable(url))}</a>'
    return esc(readable(url))


def _n(value: float | int) -> str:
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def _bytes(value: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    return ""


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (),
           wide: Sequence[int] = ()) -> str:
    """A table of cells already escaped; columns in ``numeric`` right-aligned, those
    in ``wide`` (URLs, rules) broken anywhere, the others kept whole."""
    def kind(i: int) -> str:
        return "n" if i in numeric else "u" if i in wide else "k"

    out = ["<table><thead><tr>"]
    out += [f'<th class="{kind(i)}">{esc(h)}</th>' for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="{kind(i)}">{cell}</td>' for i, cell in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{esc(alt)}">'


_SENTENCE = re.compile(r"\n+|(?<=[.!?。！？])\s+")


def _lines(text: str) -> list[str]:
    """A page's visible text in lines to compare: its lines, and long ones cut at sentences."""
    return [line.strip() for line in _SENTENCE.split(text) if line.strip()]


def changed_lines(kept: str, dropped: str) -> str:
    """The lines that differ between a kept page's text and its dropped twin's, as escaped HTML."""
    out = []
    for line in difflib.unified_diff(_lines(kept), _lines(dropped), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        cut = line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " …"
        kind = "del" if line.startswith("-") else "ins"
        out.append(f'<span class="{kind}">{esc(cut)}</span>')
        if len(out) >= DIFF_LINES:
            out.append('<span>…</span>')
            break
    if not out:
        return '<p class="note">Their visible text is the same, line for line.</p>'
    return '<pre class="diff">' + "".join(out) + "</pre>"


def _time(value: Any) -> str:
    """An ISO 8601 time as people read it (UTC, to the second)."""
    try:
        return datetime.fromisoformat(str(value)).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return esc(value)


def _when(seconds: list[float]) -> str:
    return datetime.fromtimestamp(min(seconds), timezone.utc).strftime("%Y-%m-%d %H:%M") if seconds else ""


# -- the sections ----------------------------------------------------------------------

def _cards(data: CrawlData) -> str:
    cards = []
    if data.kept is not None:
        cards.append(("kept", data.kept, "pages kept"))
        if data.unchecked:
            cards.append(("", data.unchecked, "pages passed through unchecked (in the index too)"))
    known = data.drops_known
    if known:
        cards.append(("dropped", data.dropped, "dropped as near-duplicates"))
    if data.inputs.kind == "crawl" and known:
        cards.append(("avoided", data.avoided, "requests avoided by URL rules"))
    if data.fingerprints is not None:
        cards.append(("", data.fingerprints, "fingerprints in the store"))
    if known:
        cards.append(("", data.cluster_count, "pages with near-duplicates"))
    return '<div class="cards">' + "".join(
        f'<div class="card {kind}"><b>{_n(value)}</b><span>{esc(label)}</span></div>'
        for kind, value, label in cards) + "</div>"


def _summary_section(data: CrawlData) -> str:
    rows = [(esc(k), esc(v)) for k, v in data.summary.items() if not isinstance(v, (dict, list)) and v is not None]
    return ("<section><h2>The run's summary</h2>" + _table(("what", "value"), rows, wide=(1,)) + "</section>") if rows else ""


def _timeline_section(data: CrawlData) -> str:
    """Pages kept and dropped over time, beside the distances of the drops."""
    timed = data.kept_times or data.dropped_times or data.avoided_times
    if not timed and not data.dropped:
        return ""
    parts = []
    if timed:
        parts.append(_img(plots.timeline(data.kept_times, data.dropped_times, data.avoided_times),
                          "pages kept and dropped over time"))
    if data.dropped:
        parts.append(_img(plots.distances(data.distances, max([3, *data.distances])), "drops by Hamming distance"))
    note = ("Kept: the fetch time of each page in the index (a page fetched again counts at its last fetch). "
            "Dropped and avoided: the duplicates file's times. Distance: the bits between a drop's fingerprint "
            "and its kept twin's.") if timed else ""
    grid = "wide" if len(parts) == 2 else "one"
    return (f'<section id="time"><h2>Kept and dropped</h2><div class="plots {grid}">' + "".join(parts) + "</div>"
            + (f'<p class="note">{esc(note)}</p>' if note else "") + "</section>")


#: The ranged GETs' counts (``CrawlData.ranged``), as the report says them
RANGED_WORDS = {
    "ranged_gets": "ranged GETs answered with the range (predicted copies checked before their bodies)",
    "range_confirmed": "copies confirmed: bytes matched, body never downloaded",
    "range_mismatch": "ranged GETs that did not match: the page was downloaded whole",
    "range_whole": "ranged GETs answered whole (another ETag than the page it would copy: If-Range)",
    "unconfirmable": "predicted copies downloaded whole unchecked (the fetched page's bytes unknown)",
    "ranged_bytes": "bytes of the ranged GETs",
    "bytes_saved_estimate": "bytes not downloaded (an estimate: the fetched page's length)",
}


def _ranged_part(data: CrawlData) -> str:
    """Confirmation by content: the ranged GETs and what they saved (``NEARDUP_URL_RULES_CONFIRM_BYTES``)."""
    if not data.ranged:
        return ""
    lead = ("<h3>Copies confirmed by content</h3><p>A sub-tree rule's predicted copy (or a parameter rule's, "
            "on a value seen) is requested as a ranged GET of 256 bytes of the fetched page's text; a match is a "
            "copy whose body is never downloaded. ")
    if set(data.ranged) == {"range_confirmed"} and data.ranged["range_confirmed"] == data.confirmed_lines:
        # (no run closed with its counts and no stats given: what the duplicates file says, and no more)
        return (lead + f"{_n(data.confirmed_lines)} copies were confirmed (their lines in the duplicates file; "
                "the ranged GETs' other counts are in the runs file or the crawl's stats).</p>")
    rows = [(esc(words), _bytes(data.ranged[key]) if key.endswith("bytes") or key.startswith("bytes")
             else _n(data.ranged[key])) for key, words in RANGED_WORDS.items()]
    false = data.ranged["range_mismatch"] / data.ranged["ranged_gets"] if data.ranged["ranged_gets"] else 0
    return (lead + f"{false:.1%} of the ranged GETs did not match.</p>"
            + _table(("what", "count"), rows, numeric=(1,), wide=(0,)))


def _avoided_section(data: CrawlData) -> str:
    if data.inputs.kind != "crawl":
        return ""
    if not data.avoided:
        return ('<section id="avoided"><h2>Requests avoided</h2><p class="note">No request was avoided by a '
                "learned URL rule.</p>" + _ranged_part(data) + "</section>")
    per = data.bytes_per_response
    saved = (f"about {_bytes(per * data.avoided)} not downloaded ({_bytes(per)} a response on average over "
             f"the runs that closed)") if per else "bytes saved unknown (no run of this job closed with its counts)"
    rows = [(esc(readable(rule)), _n(n)) for rule, n in data.avoided_by_rule.most_common(TOP_ROWS)]
    return (f'<section id="avoided"><h2>Requests avoided</h2><p>{_n(data.avoided)} requests were not made because '
            f"a learned URL rule maps them onto a fetched page: {esc(saved)}.</p>"
            + _table(("rule", "requests avoided"), rows, numeric=(1,), wide=(0,)) + _ranged_part(data) + "</section>")


def _where_section(data: CrawlData) -> str:
    if not data.dropped:
        return ""
    hosts = data.hosts.most_common(TOP_ROWS)
    prefixes = [(readable(p), n) for p, n in data.prefixes.most_common(TOP_ROWS)]
    by = "Drops per host or input file" if data.inputs.kind == "dedup" else "Drops per host"
    parts = [_img(plots.bars(hosts, by, "drops"), by.lower())]
    if prefixes:  # (none: a neardup dedup output whose records are named by ids, not URLs)
        parts.append(_img(plots.bars(prefixes, "Drops per path prefix", "drops", plots.DROPPED_C),
                          "drops per path prefix"))
    rest_h, rest_p = len(data.hosts) - len(hosts), len(data.prefixes) - len(prefixes)
    note = f"The top {TOP_ROWS} of {len(data.hosts):,} hosts and {len(data.prefixes):,} prefixes" \
        if rest_h > 0 or rest_p > 0 else ""
    if data.inputs.kind == "dedup":
        note = (f"{note}. " if note else "") + "A record named by an id, not a URL, counts under its input file"
    return ('<section id="where"><h2>Where the near-duplicates are</h2><div class="plots'
            + (' two">' if len(parts) == 2 else ' one">') + "".join(parts)
            + "</div>" + (f'<p class="note">{esc(note)}.</p>' if note else "") + "</section>")


def _clusters_section(data: CrawlData) -> str:
    if not data.clusters:
        return ""
    out = ['<section id="clusters"><h2>The largest clusters</h2><p class="note">A kept page and the pages dropped '
           "as its near-duplicates, the largest first, with a few of its pairs. What differs: the lines of their "
           "visible text that changed (red: the kept page's, green: the dropped page's).</p>"]
    if data.inputs.kind == "dedup":  # (its records' text is in the inputs, which the report does not read)
        out.append('<p class="note">A neardup dedup output names each record by its id and place in the input '
                   "(duplicates file, <code>source</code>); the texts stay in the input, so their differences "
                   "are not shown.</p>")
    elif not data.captured:
        out.append('<p class="note">The dropped pages\' text was not kept, so their differences are not shown: '
                   "set NEARDUP_DROPPED_TEXT_BYTES to keep it.</p>")
    for i, cluster in enumerate(data.clusters):
        title = data.titles.get(cluster.twin)
        out.append(f"<details{' open' if i == 0 else ''}><summary><b>{_n(cluster.size)}</b> near-duplicate"
                   f"{'s' if cluster.size != 1 else ''} of {'<q>' + esc(title) + '</q> ' if title else ''}"
                   f"{esc(readable(cluster.twin))}</summary>")
        for url, distance in cluster.pairs:
            out.append(f'<div class="pair"><div><div class="lab">kept</div>{link(cluster.twin)}</div>'
                       f'<div><div class="lab">dropped, {distance} bit{"s" if distance != 1 else ""} away</div>'
                       f"{link(url)}</div></div>")
            kept, dropped = data.texts.get(cluster.twin), data.texts.get(url)
            if kept is not None and dropped is not None:
                out.append(changed_lines(kept, dropped))
        out.append("</details>")
    if data.cluster_count > len(data.clusters):
        out.append(f'<p class="note">{len(data.clusters)} of {_n(data.cluster_count)} clusters shown.</p>')
    return "".join(out) + "</section>"


def _languages_section(data: CrawlData) -> str:
    if not data.languages:
        return ""
    rows = data.languages.most_common(TOP_ROWS)
    note = ("Each kept page's language, as the filter detected it for its weights (und: undetermined; unknown: "
            "indexed by a version before the index kept it).")
    if len(data.languages) > TOP_ROWS:  # (the rest in one bar: a chart that leaves languages out says so)
        rows = rows[:TOP_ROWS - 1]
        rest = len(data.languages) - len(rows)
        rows.append((f"{rest} others", sum(data.languages.values()) - sum(n for _, n in rows)))
        note += f" The {TOP_ROWS - 1} most common of {len(data.languages)} languages, the others in one bar."
    return (f'<section id="languages"><h2>Languages of the kept pages</h2>'
            f'{_img(plots.bars(rows, "Kept pages per language", "pages", plots.KEPT_C), "kept pages per language")}'
            f'<p class="note">{esc(note)}</p></section>')


def _pair(text: str) -> str:
    """A rule's example (``URL = URL``: two pages with the same content; ``URL != URL`` its
    counter-example), each URL linked if it is http(s)."""
    parts = re.split(r"( != | = )", text)
    return "".join(esc(part) if i % 2 else link(part) for i, part in enumerate(parts))


#: The order rules are listed in: those that act, those retired, then candidates (by evidence)
_STATE_ORDER = {"pinned": 0, "active": 1, "retired": 2, "candidate": 3}


def _rules_section(data: CrawlData) -> str:
    if data.inputs.kind != "crawl":
        return ""
    if not data.rules:
        if data.inputs.rules is None and (data.avoided or data.avoided_by_rule):  # (a shared crawl's JOBDIR)
            why = ("The rule book is not here, though rules avoided requests: a shared crawl keeps it on its "
                   "Redis (<code>neardup rules redis://...</code> lists it).")
        else:
            why = "No rule was learned (or the rule book is not there)."
        return f'<section id="rules"><h2>Learned URL rules</h2><p class="note">{why}</p></section>'
    ranked = sorted(data.rules, key=lambda r: (_STATE_ORDER.get(r["state"], 4), -r["evidence"], r["rule"]))
    shown = [r for r in ranked if r["state"] != "candidate"]
    shown += [r for r in ranked if r["state"] == "candidate"][:TOP_ROWS]
    rows = []
    for r in shown:
        evidence = _pair(r["example"]) if r.get("example") else ""
        if r.get("counter_example"):
            evidence += f"<br>counter-example: {_pair(r['counter_example'])}"
        rows.append((f'<span class="state {esc(r["state"])}">{esc(r["state"])}</span>', esc(readable(r["rule"])),
                     _n(r["evidence"]), _n(r["counter_examples"]), _n(r["avoided"]), evidence))
    return ('<section id="rules"><h2>Learned URL rules</h2>'
            + _table(("state", "rule", "agree", "against", "avoided", "example"), rows, numeric=(2, 3, 4), wide=(1, 5))
            + (f'<p class="note">{len(shown)} of {len(data.rules):,} rules: every rule that acts or was retired, '
               f"and the candidates with the most evidence.</p>" if len(shown) < len(data.rules) else "")
            + "</section>")


def _runs_section(data: CrawlData) -> str:
    if not data.runs:
        return ""
    rows: list[tuple[str, ...]] = []
    start: dict[str, Any] | None = None

    def row(s: dict[str, Any] | None, c: dict[str, Any] | None, last: bool) -> tuple[str, ...]:
        ended = _time(c["time"]) if c else ("running, or killed" if last else "killed")
        counts = (_n(int(c.get("fetched", 0))), _n(int(c.get("kept", 0))), _n(int(c.get("dropped", 0)))) if c \
            else ("", "", "")
        return (_time(s["time"]) if s else "", "resumed" if s and s.get("resume") else "first run" if s else "",
                _n(int(s.get("fingerprints", 0))) if s else "", _n(int(s.get("redelivered", 0))) if s else "",
                ended, esc(c.get("reason", "")) if c else "", *counts)

    for line in data.runs:
        if line["event"] == "start":
            if start is not None:
                rows.append(row(start, None, False))
            start = line
        else:
            rows.append(row(start, line, False))
            start = None
    if start is not None:
        rows.append(row(start, None, True))
    resumes = sum(1 for line in data.runs if line["event"] == "start" and line.get("resume"))
    return (f'<section id="runs"><h2>Runs and resumes</h2><p>{len(rows)} run{"s" if len(rows) != 1 else ""}, '
            f"{resumes} of them resuming the one before.</p>"
            + _table(("started", "", "fingerprints at start", "requests redelivered", "ended", "reason",
                      "fetched", "kept", "dropped"), rows, numeric=(2, 3, 6, 7, 8)) + "</section>")


def render(data: CrawlData) -> str:
    """The report of ``data``, as the text of an HTML file."""
    kind = "neardup dedup output" if data.inputs.kind == "dedup" else "crawl"
    started = _when(data.kept_times + data.dropped_times)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        _cards(data), _summary_section(data), _timeline_section(data), _where_section(data),
        _clusters_section(data), _avoided_section(data), _rules_section(data), _languages_section(data),
        _runs_section(data),
    ]
    if not data.drops_known:  # (a store alone)
        body.insert(1, '<section><h2>No duplicates file</h2><p class="note">There is no duplicates file here, so '
                       "what was dropped is not known: a crawl writes it beside its store (with JOBDIR, "
                       "NEARDUP_STORE or NEARDUP_DUPLICATES_FILE), a neardup dedup run into its OUT directory, "
                       "even with --store. Give that.</p></section>")
    elif not data.dropped and not data.avoided:
        body.insert(1, '<section><h2>No near-duplicates</h2><p class="note">Nothing was dropped as a '
                       "near-duplicate.</p></section>")
    notes = []
    if data.counts_from_stats:
        notes.append("This crawl kept no duplicates file (it had no JOBDIR, NEARDUP_STORE or NEARDUP_DUPLICATES_FILE): "
                     "the counts above are its stats, and which page each drop duplicated is not known.")
    if data.skipped_lines:
        notes.append(f"{data.skipped_lines:,} line{'s' if data.skipped_lines != 1 else ''} of the input could not be "
                     f"read and {'were' if data.skipped_lines != 1 else 'was'} skipped.")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp())}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Near-duplicate report: {esc(data.inputs.where)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<header><h1>Near-duplicate report</h1><p>{esc(kind)} {esc(data.inputs.where)}"
        f"{' · from ' + esc(started) if started else ''} · made {esc(generated)}</p></header>",
        "<main>", *[part for part in body if part],
        *[f'<p class="note">{esc(n)}</p>' for n in notes],
        "</main><footer>scrapy-neardup · one file, no script, nothing fetched</footer></body></html>",
    ])
