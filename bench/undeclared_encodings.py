"""Pages that declare no encoding: is the one detected the one they are in?

    .venv/bin/python bench/undeclared_encodings.py [--data ../shared/data] [--pages 40] [--out FILE]

The installation guide (``../shared/data/sites/installation-guide.tar.gz``,
the same 84 pages in 19 languages, UTF-8) gives real text in each language
whose encoding is known: each page is written again in the legacy code page
its language used on the web (``LEGACY``), with nothing declaring it, and
``text.decode.sniff_encoding`` must find an encoding that decodes it to the
same text. Three sizes: the first 200 and 2,000 characters of the page's
prose (lines of 8 words or more, in a minimal page), and the whole page with
its ``<meta charset>`` taken out. Reports, per language and size, the pages
decoded right, and how many were read with an East Asian codec when they are
not in one (``cjk``).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.text import extract  # noqa: E402
from scrapy_neardup.dedup.text.decode import sniff_encoding  # noqa: E402

#: the guide's languages and the legacy code page each was mostly served in
LEGACY = {"ca": "cp1252", "cs": "cp1250", "da": "cp1252", "de": "cp1252", "el": "cp1253", "en": "cp1252",
          "es": "cp1252", "fr": "cp1252", "id": "cp1252", "it": "cp1252", "ja": "cp932", "ko": "cp949",
          "nl": "cp1252", "pt": "cp1252", "ro": "cp1250", "ru": "cp1251", "sv": "cp1252", "vi": "cp1258",
          "zh_CN": "gb18030"}
EAST_ASIAN = {"gb18030", "big5hkscs", "big5", "cp932", "shift_jis", "euc_jp", "cp949", "euc_kr"}
SIZES = (200, 2_000, None)  # characters of prose; None: the whole page
_META = re.compile(rb"<meta[^>]*charset[^>]*>", re.I)


def samples(root: Path, lang: str, pages: int) -> dict[int | None, list[bytes]]:
    """UTF-8 HTML of each size (``SIZES``), from the first ``pages`` pages of ``lang``."""
    out: dict[int | None, list[bytes]] = {size: [] for size in SIZES}
    for path in sorted((root / lang).glob("*.html"))[:pages]:
        data = path.read_bytes()
        prose = " ".join(line for line in extract(data).text.splitlines() if len(line.split()) >= 8)
        for size in SIZES:
            if size is None:
                out[size].append(_META.sub(b"", data))
            elif len(prose) >= size:
                out[size].append(f"<html><head><title>t</title></head><body><p>{prose[:size]}</p></body></html>"
                                 .encode())
    return out


def decoded_right(utf8: bytes, codec: str) -> tuple[bool, str]:
    """(whether ``utf8`` written in ``codec`` and undeclared decodes to the same text, the encoding found)."""
    data = utf8.decode("utf-8").encode(codec, errors="xmlcharrefreplace")
    found, bom = sniff_encoding(data)
    return data[bom:].decode(found, errors="replace") == data.decode(codec, errors="replace"), found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data")
    ap.add_argument("--pages", type=int, default=40, help="pages per language")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.data / "sites" / "installation-guide.tar.gz") as tf:
            tf.extractall(tmp, filter="data")
        root = Path(tmp) / "installation-guide" / "site"
        for lang, codec in LEGACY.items():
            rows[lang] = {}
            for size, pages in samples(root, lang, args.pages).items():
                found = collections.Counter()
                right = 0
                for utf8 in pages:
                    ok, enc = decoded_right(utf8, codec)
                    right += ok
                    found[enc] += 1
                cjk = 0 if codec in EAST_ASIAN else sum(n for enc, n in found.items() if enc in EAST_ASIAN)
                rows[lang][str(size or "page")] = {"pages": len(pages), "right": right, "cjk": cjk,
                                                   "found": dict(found.most_common())}
    print("| language (code page) | " + " | ".join(f"{s or 'whole page'}{' chars' if s else ''}" for s in SIZES)
          + " |")
    print("|---|" + "---|" * len(SIZES))
    totals = collections.Counter()
    for lang, by_size in rows.items():
        cells = []
        for size in SIZES:
            r = by_size[str(size or "page")]
            totals[(size, "right")] += r["right"]
            totals[(size, "pages")] += r["pages"]
            totals[(size, "cjk")] += r["cjk"]
            cells.append(f"{r['right']}/{r['pages']}" + (f" ({r['cjk']} East Asian)" if r["cjk"] else ""))
        print(f"| {lang} ({LEGACY[lang]}) | " + " | ".join(cells) + " |")
    print("| all | " + " | ".join(f"{totals[(s, 'right')]}/{totals[(s, 'pages')]} ({totals[(s, 'cjk')]} East Asian)"
                                   for s in SIZES) + " |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
