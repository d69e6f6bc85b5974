"""Build ``dedup/features/data/term_zipf.npz``: how frequent each token the
fingerprint makes is in general text, per language, derived once from
``wordfreq`` (pinned; its data is CC BY-SA 4.0).

    .venv/bin/python scripts/build_term_table.py [--min-zipf 4.0] [--out dedup/features/data/term_zipf.npz]

wordfreq lists *words* as its own tokeniser cuts them (MeCab morphemes for
Japanese and Korean); the fingerprint weighs *tokens* as ``tokens`` cuts them
(jieba words for Han, overlapping bigrams for kana and other scripts written
without spaces). So the table holds the expected frequency of each of *our*
tokens under a unigram model of wordfreq's words:

* each word's tokens (``tokens.tokenize``) get the word's frequency: "don't"
  adds to "don" and "t"; a Japanese word's kana bigrams add to those bigrams;
* a no-space run (kana) does not stop at a word's edge: the bigram made of a
  word's last character and the next word's first, both kana, gets
  ``P(a word ends in x) x P(the next starts with y)`` (words independent);
  a lone kana character is a token only when both neighbours are not kana,
  so a word that is one kana character gets its frequency times
  ``P(no kana before) x P(no kana after)``, and a word's edge run of one
  kana character counts only on the side it is not joined.

Tokens with digits are left out (``number_weight`` weighs them). Only tokens
at ``--min-zipf`` or above are kept: the weight curve leaves rarer ones at 1.

Layout (numpy, no pickle): ``langs`` (U8), ``starts`` (int64, len+1: each
language's slice of the token arrays), ``byte_starts`` (the same in the blob), ``blob`` (uint8: the tokens' UTF-8,
newline-separated, in order), ``zipf_cb`` (uint16: zipf x 100).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import regex
import wordfreq
from importlib.metadata import version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.features.tokens import NOSPACE_CLASS, normalize, tokenize_normalized  # noqa: E402

_NOSPACE = regex.compile(NOSPACE_CLASS, regex.V1)
_DIGIT = regex.compile(r"\d")


def token_frequencies(lang: str) -> dict[str, float]:
    """{our token: expected occurrences per word of text} for wordfreq's ``lang``."""
    words = wordfreq.get_frequency_dict(lang, wordlist="best")
    freq: dict[str, float] = defaultdict(float)
    ends: dict[str, float] = defaultdict(float)  # P(a word ends in kana x)
    starts: dict[str, float] = defaultdict(float)
    lone_edge: list[tuple[str, float, bool, bool]] = []  # (char, f, alone at start, alone at end)
    for word, f in words.items():
        w = normalize(word)
        if not w:
            continue
        first, last = w[0], w[-1]
        kana_first, kana_last = bool(_NOSPACE.match(first)), bool(_NOSPACE.match(last))
        if kana_first:
            starts[first] += f
        if kana_last:
            ends[last] += f
        toks = tokenize_normalized(w)
        if not toks:
            continue
        # a one-character kana token at a word's edge: it joins the neighbour's
        # kana when there is one (then it is in a cross bigram instead)
        edge_start = kana_first and (len(w) == 1 or not _NOSPACE.match(w[1]))
        edge_end = kana_last and (len(w) == 1 or not _NOSPACE.match(w[-2]))
        for i, t in enumerate(toks):
            if (i == 0 and edge_start and t == first) or (i == len(toks) - 1 and edge_end and t == last):
                continue
            freq[t] += f
        if edge_start or edge_end:
            lone_edge.append((first if edge_start else last, f, edge_start, edge_end))
    p_kana_end, p_kana_start = sum(ends.values()), sum(starts.values())
    for ch, f, at_start, at_end in lone_edge:
        freq[ch] += f * ((1 - p_kana_end) if at_start else 1) * ((1 - p_kana_start) if at_end else 1)
    if ends and starts:
        top_e = sorted(ends.items(), key=lambda kv: -kv[1])[:400]
        top_s = sorted(starts.items(), key=lambda kv: -kv[1])[:400]
        for x, fx in top_e:
            for y, fy in top_s:
                freq[x + y] += fx * fy
    return freq


def traditional_variants(freq: dict[str, float], limit: int = 8) -> dict[str, float]:
    """``freq`` (Simplified Chinese tokens) with each token also in the
    Traditional spellings wordfreq's own character map folds into it (at most
    ``limit`` per token): wordfreq looks Traditional text up by simplifying
    it; the fingerprint hashes tokens as written, so the table holds both."""
    from itertools import product

    from wordfreq.chinese import SIMPLIFIED_MAP

    back: dict[str, list[str]] = defaultdict(list)
    for trad, simp in SIMPLIFIED_MAP.items():
        if isinstance(simp, int):
            simp = chr(simp)
        if len(simp) == 1 and chr(trad) != simp:
            back[simp].append(chr(trad))
    out: dict[str, float] = dict(freq)
    for token, f in freq.items():
        choices = [[ch, *back.get(ch, [])] for ch in token]
        if math.prod(map(len, choices)) <= limit:
            for spelling in map("".join, product(*choices)):
                if spelling != token:
                    out[spelling] = max(out.get(spelling, 0.0), f)
    return out


def build(min_zipf: float) -> tuple[list[str], list[list[tuple[str, int]]]]:
    langs = sorted([*wordfreq.available_languages("best"), "zh-Hant"])
    tables = []
    for lang in langs:
        freq = traditional_variants(token_frequencies("zh")) if lang == "zh-Hant" else token_frequencies(lang)
        rows = []
        for t, f in freq.items():
            if f <= 0 or _DIGIT.search(t):
                continue
            z = 9 + math.log10(f)
            if z >= min_zipf:
                rows.append((t, round(z * 100)))
        rows.sort(key=lambda r: (-r[1], r[0]))
        tables.append(rows)
        print(f"{lang}: {len(rows)} tokens, top {rows[:8]}", file=sys.stderr)
    return langs, tables


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-zipf", type=float, default=4.0, help="rarer tokens are left out: they weigh 1 at any knee at or above this (the default knee is 5)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "dedup/features/data/term_zipf.npz"))
    a = ap.parse_args()
    langs, tables = build(a.min_zipf)
    blob = "\n".join(t for rows in tables for t, _ in rows).encode("utf-8")
    starts = np.cumsum([0] + [len(rows) for rows in tables]).astype(np.int64)
    zipf = np.array([z for rows in tables for _, z in rows], dtype=np.uint16)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # each language's slice of the blob, in bytes (its last token's newline left out)
    byte_starts = np.cumsum([0] + [sum(len(t.encode("utf-8")) + 1 for t, _ in rows) for rows in tables])
    np.savez_compressed(out, langs=np.array(langs, dtype="U16"), starts=starts, byte_starts=byte_starts.astype(np.int64),
                        blob=np.frombuffer(blob, dtype=np.uint8), zipf_cb=zipf)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()[:12]
    print(f"{out}: {out.stat().st_size:,} bytes, {len(zipf):,} tokens in {len(langs)} languages, "
          f"wordfreq {version('wordfreq')}, sha256 {digest}")


if __name__ == "__main__":
    main()
