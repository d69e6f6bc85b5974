"""Where the similarity of unrelated pages of one language comes from.

    .venv/bin/python bench/spread_diagnosis.py [--langs zh_CN,de,nl,it,cs,en | all] [--seeds 16]
        [--out bench/results/spread_diagnosis.json]

On the installation guide (``../shared/data/sites/installation-guide.tar.gz``,
84 pages in each of 19 languages), for every pair of pages of one language
whose word 5-shingle Jaccard is below 0.2 (``bench/quality.py``'s "unrelated"),
this script answers two questions.

1. **Does the fingerprint do what its weights say?** Simhash of a weighted
   feature vector is a random-hyperplane hash: two vectors at angle
   ``theta`` differ in each bit with probability about ``theta / pi``, so
   their expected distance is ``64 * arccos(cos) / pi``, where ``cos`` is the
   weighted cosine of the two pages' feature vectors (the reference path's
   features and weights, after the share cap: exactly what simhash sums). The
   script compares that prediction with the observed distance, pair by pair,
   and with the mean over ``--seeds`` hash seeds (each seed is another family
   of hash functions, so the mean over seeds is the distance the weights
   imply, without the luck of one hash). If observation and prediction
   agree, a small distance is in the weights and features, not in the
   hashing or the exact rounding of the sums.

2. **Which features carry the similarity?** The dot product of the two
   vectors is split, feature by feature, two ways:

   * by the *kind of token*: ``common`` (damped by the term table: common in
     general text of the language), ``number`` (a digit in it),
     ``latin`` (Latin letters in a page of a language not written in Latin:
     English words and commands inside a Chinese page), ``book`` (in at
     least half of the language's pages: the guide's own vocabulary and
     chrome, ``debian``, ``installer``, ``安装``), ``page`` (the rest);
   * by *where it occurs*, from the block plan (``features.blocks``):
     ``chrome`` (navigation, headers, footers, link-dense blocks, the
     title's site part), ``listing`` (blocks mostly in ``<pre>``/``<code>``),
     ``short`` (short prose blocks beside long ones), ``title`` and
     ``prose``. A feature's weight is split in proportion to its weighted
     counts in each place, and a pair's product ``w_a w_b`` is given half by
     each page's split.

   For each kind and place it also gives the predicted distance with that
   kind removed from both vectors (the share cap left as it was), so the
   share of the distance each kind takes away is read directly.

It also reports, per language: the pairs CLD2 reads in two languages (their
masks add distance; the comparison with the prediction is also given over the
pairs read in one), pairs within one chapter against pairs of two chapters,
the ten closest pairs with the tokens they share most, and how concentrated a
page's weight is in the squared norm (its largest token's share; how many
equal tokens it is worth).

Ground truth: ``bench/quality.py`` computes J5 on ``Fingerprint.text``, the
page's visible text, the same text the features read (furniture included,
at full weight in J5 and at ``furniture_weight`` in the features; the title
apart). The script also gives J5 on the prose blocks alone, and the
weighted cosine of the prose alone, for the closest pairs.

Reference path only (``feature_vector``): it gives the compiled path's
features and weights (tested), and feature names are needed here. Runs in
about a minute for six languages, three for all 19 (16 seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from quality import all_pairs_jaccard, shingles  # noqa: E402
from scrapy_neardup.dedup.features import FeatureParams  # noqa: E402
from scrapy_neardup.dedup.features.blocks import _title_parts  # noqa: E402
from scrapy_neardup.dedup.features.language import page_language_code  # noqa: E402
from scrapy_neardup.dedup.features.weights import feature_vector, language_factors  # noqa: E402
from scrapy_neardup.dedup.features.tokens import normalize, tokenize_normalized  # noqa: E402
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402
from scrapy_neardup.dedup.text import extract  # noqa: E402
from scrapy_neardup.dedup.text.page import (ROW_CODE, ROW_END, ROW_FURNITURE, ROW_HAN, ROW_LINK,  # noqa: E402
                                            ROW_START, ROW_WORDS)

KINDS = ("common", "number", "latin", "book", "page")
PLACES = ("chrome", "listing", "short", "title", "prose")
_DIGIT = re.compile(r"\d")
_LATIN = regex.compile(r"^[\p{Latin}\p{N}\p{M}]+$")
#: guide folders whose language is not written in Latin letters
NON_LATIN = {"zh_CN", "ja", "ko", "el", "ru"}


def block_places(page, params: FeatureParams) -> list[str]:
    """The place of each block, as ``blocks._block_plan`` decides its weight:
    chrome (furniture or link-dense), listing, short (prose blocks under
    ``short_block_tokens`` beside a body of long ones), prose."""
    rows = page.rows
    length = rows[:, ROW_END] - rows[:, ROW_START]
    furniture = (rows[:, ROW_FURNITURE] != 0) | (rows[:, ROW_LINK] > params.link_density_cutoff * length)
    listing = ~furniture & (2 * rows[:, ROW_CODE] > length)
    prose = ~furniture & ~listing
    tokens10 = 10 * rows[:, ROW_WORDS] + 6 * rows[:, ROW_HAN]
    short = prose & (tokens10 < 10 * params.short_block_tokens)
    long_total, short_total = int(tokens10[prose & ~short].sum()), int(tokens10[short].sum())
    out = []
    for i in range(len(rows)):
        if furniture[i]:
            out.append("chrome")
        elif listing[i]:
            out.append("listing")
        elif short[i] and long_total >= short_total:
            out.append("short")
        else:
            out.append("prose")
    return out


def page_record(path: str, page, params: FeatureParams, fpers: list[Fingerprinter]) -> dict | None:
    """Features, weights, where each feature's weight comes from, and the
    fingerprints under every seed, of one page."""
    code = page_language_code(page, params)
    names, weights, _ = feature_vector(page, params, code)
    results = [f.fingerprint_page(page) for f in fpers]
    if not results[0].ok or not names:
        return None
    # weighted counts of each token by place, as the features count them (content 1, furniture fw)
    content_idx, furniture_idx = (set(a.tolist()) for a in page.plan[1][:2]) if page.plan else (set(), set())
    places = block_places(page, params)
    by_place: dict[str, dict[str, float]] = {}
    text = page.text
    for i, (a, b) in enumerate(page.rows[:, :2].tolist()):
        w = params.furniture_weight if i in furniture_idx else 1.0
        counts = by_place.setdefault(places[i], {})
        for tok in tokenize_normalized(normalize(text[a:b])):
            counts[tok] = counts.get(tok, 0.0) + w
    main, rest = _title_parts(page, params)
    for part, place, w in [(t, "title", 1.0) for t in main] + [(t, "chrome", params.furniture_weight) for t in rest]:
        counts = by_place.setdefault(place, {})
        for tok in tokenize_normalized(normalize(part)):
            counts[tok] = counts.get(tok, 0.0) + w
    share = np.zeros((len(names), len(PLACES)))
    for j, place in enumerate(PLACES):
        counts = by_place.get(place, {})
        share[:, j] = [counts.get(f, 0.0) for f in names]
    total = share.sum(axis=1, keepdims=True)
    share = np.where(total > 0, share / np.where(total > 0, total, 1), 1.0 / len(PLACES))
    prose_idx = [i for i, p in enumerate(places) if p == "prose"]
    prose_text = "\n".join(text[a:b] for a, b in page.rows[prose_idx, :2].tolist())
    return {"path": path, "language": code, "names": names, "weights": weights, "place_share": share,
            "factors": language_factors(params, code), "values": [r.value for r in results],
            "text": results[0].text, "prose_text": prose_text}


def kind_of(name: str, factors: dict[str, float], non_latin: bool, df_share: float) -> str:
    if name in factors:
        return "common"
    if not name.isalpha() and _DIGIT.search(name):
        return "number"
    if non_latin and _LATIN.match(name):
        return "latin"
    if df_share >= 0.5:
        return "book"
    return "page"


def predicted(cos: np.ndarray) -> np.ndarray:
    return 64 * np.arccos(np.clip(cos, -1.0, 1.0)) / math.pi


def cosines(w: np.ndarray) -> np.ndarray:
    norm = np.sqrt((w * w).sum(axis=1))
    norm[norm == 0] = 1.0
    return (w @ w.T) / np.outer(norm, norm)


def projections(w: np.ndarray, ii: np.ndarray, jj: np.ndarray, n_proj: int = 2048, seed: int = 0) -> dict:
    """Mean distance (scaled to 64 bits) of the pairs under ``n_proj`` random
    hyperplanes drawn as Gaussian vectors (what ``64 * arccos(cos) / pi``
    assumes) and as +-1 vectors (what simhash's hash bits are): which of the
    two the hashing follows, without the luck of one seed."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in ("gaussian", "rademacher"):
        dis = np.zeros(ii.size)
        for _ in range(n_proj // 256):
            r = rng.standard_normal((w.shape[1], 256)) if name == "gaussian" else \
                rng.integers(0, 2, (w.shape[1], 256)) * 2.0 - 1.0
            s = (w @ r) > 0
            dis += (s[ii] != s[jj]).sum(axis=1)
        d = dis / n_proj * 64
        out[f"{name}_projection_mean"] = float(d.mean())
    return out


def diagnose(lang: str, records: list[dict], closest: int = 10) -> dict:
    """The measurements of one language's unrelated pairs."""
    n = len(records)
    vocab: dict[str, int] = {}
    for r in records:
        for f in r["names"]:
            vocab.setdefault(f, len(vocab))
    df = np.zeros(len(vocab))
    w = np.zeros((n, len(vocab)))
    place = np.zeros((len(PLACES), n, len(vocab)))
    for i, r in enumerate(records):
        at = np.array([vocab[f] for f in r["names"]])
        w[i, at] = r["weights"]
        place[:, i, at] = r["place_share"].T
        df[at] += 1
    names = list(vocab)
    factors: dict[str, float] = {}
    for r in records:
        factors.update(r["factors"])
    kinds = np.array([kind_of(f, factors, lang in NON_LATIN, df[k] / n) for f, k in vocab.items()])
    j5 = all_pairs_jaccard([shingles(r["text"]) for r in records])
    ii, jj = np.triu_indices(n, 1)
    sel = j5[ii, jj] < 0.2
    ii, jj = ii[sel], jj[sel]
    values = np.array([r["values"] for r in records], dtype=np.uint64)  # pages x seeds
    same_mask = np.array([records[a]["language"] == records[b]["language"] for a, b in zip(ii, jj)])
    dist = np.bitwise_count(values[ii] ^ values[jj]).astype(float)  # pairs x seeds
    cos = cosines(w)[ii, jj]
    pred = predicted(cos)
    norms2 = (w * w).sum(axis=1)
    dot = (w @ w.T)[ii, jj]
    out: dict = {"pages": n, "pairs": int(ii.size), "pairs_two_detected_languages": int((~same_mask).sum()),
                 "detected": sorted({r["language"] for r in records}),
                 "observed_mean": float(dist[:, 0].mean()), "observed_sd": float(dist[:, 0].std()),
                 "observed_mean_all_seeds": float(dist.mean()), "seeds": int(dist.shape[1]),
                 "predicted_mean": float(pred.mean()), "predicted_sd_of_expectation": float(pred.std()),
                 # a pair's distance is binomial(64, p) about its expectation: the sd all pairs would show
                 "predicted_sd": float(math.sqrt(pred.var() + (64 * (pred / 64) * (1 - pred / 64)).mean())),
                 "corr_pred_observed_seed0": float(np.corrcoef(pred, dist[:, 0])[0, 1]),
                 "corr_pred_seed_mean": float(np.corrcoef(pred, dist.mean(axis=1))[0, 1]),
                 "mean_abs_pred_minus_seed_mean": float(np.abs(pred - dist.mean(axis=1)).mean()),
                 "observed_mean_per_seed": [round(float(x), 2) for x in dist.mean(axis=0)],
                 "observed_sd_per_seed": [round(float(x), 2) for x in dist.std(axis=0)],
                 **projections(w, ii, jj),
                 "mean_cos": float(cos.mean()), "within_10_seed0": int((dist[:, 0] <= 10).sum()),
                 "within_10_all_seeds_per_seed": float((dist <= 10).sum() / dist.shape[1]),
                 "predicted_within_10": int((pred <= 10).sum())}
    # the dot product by kind and by place, as shares of the pairs' summed dot products
    total_dot = dot.sum()
    by_kind, without_kind = {}, {}
    for kind in KINDS:
        wk = w * (kinds == kind)
        dk = (wk @ w.T)[ii, jj]
        by_kind[kind] = float(dk.sum() / total_dot)
        rest = w - wk
        c = cosines(rest)[ii, jj]
        without_kind[kind] = float(predicted(c).mean())
    # of each page's weight, the share held by tokens the other page of the pair also has, by kind
    # (the mean over pairs of both pages' shares): w @ has.T sums a's weights over b's tokens
    has = (w > 0).astype(np.float64)
    totals = w.sum(axis=1)
    common_share = {}
    for kind in KINDS:
        inside = (w * (kinds == kind)) @ has.T
        common_share[kind] = float(((inside[ii, jj] / totals[ii] + inside[jj, ii] / totals[jj]) / 2).mean())
    out["common_weight_share_by_kind"] = common_share
    # of each page's total weight, the share per kind (how much of a page each kind is)
    weight_share_kind = {kind: float((w * (kinds == kind)).sum(axis=1).mean() / w.sum(axis=1).mean())
                         for kind in KINDS}
    by_place, without_place = {}, {}
    for p, pl in enumerate(PLACES):
        wp = w * place[p]
        contrib = 0.5 * ((wp @ w.T) + (w @ wp.T))[ii, jj]
        by_place[pl] = float(contrib.sum() / total_dot)
        c = cosines(w - wp)[ii, jj]
        without_place[pl] = float(predicted(c).mean())
    weight_share_place = {pl: float((w * place[p]).sum(axis=1).mean() / w.sum(axis=1).mean())
                          for p, pl in enumerate(PLACES)}
    # prose alone (long prose blocks, title aside), page-specific kinds only
    prose_only = w * place[PLACES.index("prose")]
    out.update(dot_share_by_kind=by_kind, dot_share_by_place=by_place, weight_share_by_kind=weight_share_kind,
               weight_share_by_place=weight_share_place, predicted_mean_without_kind=without_kind,
               predicted_mean_without_place=without_place,
               predicted_mean_prose_only=float(predicted(cosines(prose_only)[ii, jj]).mean()),
               predicted_mean_page_words_only=float(predicted(cosines(w * (kinds == "page"))[ii, jj]).mean()))
    # the closest pairs: what they share
    j5_prose = all_pairs_jaccard([shingles(r["prose_text"]) for r in records])
    rows = []
    for t in np.argsort(dist[:, 0], kind="stable")[:closest]:
        a, b = int(ii[t]), int(jj[t])
        prod = w[a] * w[b]
        top = np.argsort(-prod)[:8]
        kd = {kind: float(prod[kinds == kind].sum() / prod.sum()) for kind in KINDS}
        rows.append({"a": records[a]["path"], "b": records[b]["path"], "distance": int(dist[t, 0]),
                     "mean_over_seeds": float(dist[t].mean()), "predicted": float(pred[t]), "cos": float(cos[t]),
                     "j5": float(j5[a, b]), "j5_prose": float(j5_prose[a, b]),
                     "dot_share_by_kind": kd,
                     "top_shared": [(names[k], kinds[k], round(float(prod[k] / dot[t]), 3)) for k in top]})
    out["closest"] = rows
    # the book's most shared features: product summed over all unrelated pairs
    prod_sum = np.zeros(len(vocab))
    for a in range(n):
        m = jj[ii == a]
        if m.size:
            prod_sum += w[a] * w[m].sum(axis=0)
    top = np.argsort(-prod_sum)[:15]
    out["top_shared_overall"] = [(names[k], str(kinds[k]), int(df[k]), round(float(prod_sum[k] / total_dot), 4))
                                 for k in top]
    out["norms_mean"] = float(np.sqrt(norms2).mean())
    # how concentrated a page's weight is in simhash's geometry: the largest feature's share of the
    # squared norm, and the participation ratio (|w|^4 / sum w^4: how many equal features it is worth)
    sq = w * w
    out["top_feature_share_of_squared_norm"] = float((sq.max(axis=1) / norms2).mean())
    out["effective_features"] = float((norms2**2 / (sq * sq).sum(axis=1)).mean())
    out["distinct_features"] = float((w > 0).sum(axis=1).mean())
    # pairs of one chapter (ch03s01 ~ ch03s04, apas01 ~ apas03) against the rest: topic, not chrome
    chapter = [re.sub(r"s\d+$", "", Path(r["path"]).stem) for r in records]
    same = np.array([chapter[a] == chapter[b] for a, b in zip(ii, jj)])
    # pairs CLD2 reads in one language: the language masks cancel, so the distance is the simhash's alone
    one = same_mask
    if one.any():
        out["one_detected_language"] = {
            "pairs": int(one.sum()), "observed_mean": float(dist[one, 0].mean()), "observed_sd": float(dist[one, 0].std()),
            "mean_all_seeds": float(dist[one].mean()), "sd_all_seeds": float(dist[one].std(axis=0).mean()),
            "mean_per_seed": [round(float(x), 2) for x in dist[one].mean(axis=0)],
            "predicted_mean": float(pred[one].mean()),
            "predicted_sd": float(math.sqrt(pred[one].var() + (pred[one] * (1 - pred[one] / 64)).mean()))}
    out["same_chapter"] = {"pairs": int(same.sum()), "observed_mean": float(dist[same, 0].mean()),
                           "mean_all_seeds": float(dist[same].mean()), "predicted_mean": float(pred[same].mean())}
    out["other_chapters"] = {"pairs": int((~same).sum()), "observed_mean": float(dist[~same, 0].mean()),
                             "mean_all_seeds": float(dist[~same].mean()), "predicted_mean": float(pred[~same].mean())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    ap.add_argument("--langs", default="zh_CN,de,nl,it,cs,en", help="guide folders, comma-separated, or 'all'")
    ap.add_argument("--seeds", type=int, default=16, help="hash seeds (0 is the default scheme's)")
    ap.add_argument("--out", default="bench/results/spread_diagnosis.json")
    a = ap.parse_args()
    params = FeatureParams()
    fpers = [Fingerprinter(params, seed=s) for s in range(a.seeds)]
    langs = a.langs.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(Path(a.data) / "sites" / "installation-guide.tar.gz") as tf:
            tf.extractall(tmp, filter="data")
        site = Path(tmp) / "installation-guide" / "site"
        if langs == ["all"]:
            langs = sorted(d.name for d in site.iterdir() if d.is_dir())
        for lang in langs:
            records = []
            for f in sorted((site / lang).glob("*.html")):
                rec = page_record(f"{lang}/{f.name}", extract(f.read_bytes()), params, fpers)
                if rec is not None:
                    records.append(rec)
            res = diagnose(lang, records)
            results[lang] = res
            print(f"{lang}: {res['pairs']} unrelated pairs; observed mean {res['observed_mean']:.1f} sd "
                  f"{res['observed_sd']:.1f} (all seeds {res['observed_mean_all_seeds']:.1f}); predicted "
                  f"64*arccos(cos)/pi {res['predicted_mean']:.1f} sd {res['predicted_sd']:.1f}; corr "
                  f"{res['corr_pred_seed_mean']:.2f}; mean cos {res['mean_cos']:.3f}; within 10: "
                  f"{res['within_10_seed0']} (per seed {res['within_10_all_seeds_per_seed']:.1f}, predicted "
                  f"{res['predicted_within_10']})", flush=True)
            print(f"   projections: gaussian {res['gaussian_projection_mean']:.1f} rademacher "
                  f"{res['rademacher_projection_mean']:.1f}; mean per seed {res['observed_mean_per_seed']}; "
                  f"sd per seed {res['observed_sd_per_seed']}")
            fmt = lambda d: " ".join(f"{k} {v:.2f}" for k, v in d.items())  # noqa: E731
            print(f"   dot share by kind:  {fmt(res['dot_share_by_kind'])}")
            print(f"   weight share kind:  {fmt(res['weight_share_by_kind'])}")
            print(f"   shared tokens' weight share: {fmt(res['common_weight_share_by_kind'])} (all "
                  f"{sum(res['common_weight_share_by_kind'].values()):.2f})")
            print(f"   mean without kind:  {fmt(res['predicted_mean_without_kind'])}")
            print(f"   dot share by place: {fmt(res['dot_share_by_place'])}")
            print(f"   weight share place: {fmt(res['weight_share_by_place'])}")
            print(f"   mean without place: {fmt(res['predicted_mean_without_place'])}; prose only "
                  f"{res['predicted_mean_prose_only']:.1f}; page words only {res['predicted_mean_page_words_only']:.1f}")
            print(f"   top shared: {res['top_shared_overall'][:10]}")
            print(f"   per page: {res['distinct_features']:.0f} features, worth {res['effective_features']:.1f} equal ones; "
                  f"the largest holds {res['top_feature_share_of_squared_norm']:.2f} of the squared norm")
            if res["pairs_two_detected_languages"] and "one_detected_language" in res:
                o = res["one_detected_language"]
                print(f"   {res['pairs_two_detected_languages']} pairs read in two languages ({res['detected']}); "
                      f"the {o['pairs']} in one: mean {o['observed_mean']:.1f} sd {o['observed_sd']:.1f} (seeds "
                      f"{o['mean_all_seeds']:.1f} sd {o['sd_all_seeds']:.1f}), predicted {o['predicted_mean']:.1f} "
                      f"sd {o['predicted_sd']:.1f}")
            sc, oc = res["same_chapter"], res["other_chapters"]
            print(f"   same chapter: {sc['pairs']} pairs, mean {sc['observed_mean']:.1f} (seeds {sc['mean_all_seeds']:.1f}, "
                  f"pred {sc['predicted_mean']:.1f}); other chapters: {oc['pairs']} pairs, mean {oc['observed_mean']:.1f} "
                  f"(seeds {oc['mean_all_seeds']:.1f}, pred {oc['predicted_mean']:.1f})")
            for row in res["closest"][:4]:
                print(f"   closest {row['a']} ~ {row['b']}: d {row['distance']} (seeds {row['mean_over_seeds']:.1f}, "
                      f"pred {row['predicted']:.1f}) J5 {row['j5']:.3f} prose J5 {row['j5_prose']:.3f} "
                      f"{fmt(row['dot_share_by_kind'])} top {row['top_shared'][:5]}", flush=True)
    if len(results) > 1:
        # one hash family's draw is shared by every language (debian, linux, gnu hash alike in all of them)
        means = np.array([r["observed_mean_per_seed"] for r in results.values()])
        ranks = (means[:, :, None] > means[:, None, :]).sum(axis=2)  # rank of each seed within its language
        print(f"seed 0: mean rank {ranks[:, 0].mean():.1f} of 0..{means.shape[1] - 1} across {len(results)} "
              f"languages; languages' means at seed 0 {means[:, 0].min():.1f}-{means[:, 0].max():.1f}, over all "
              f"seeds {means.mean(axis=1).min():.1f}-{means.mean(axis=1).max():.1f}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
