"""Simhash core: the worked examples, bit order, hashing, distances."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_neardup.dedup.features import feature_hash
from scrapy_neardup.dedup.simhash import from_hex, hamming, hamming_many, simhash, simhash_features, simhash_vector, to_hex


def b(s: str) -> int:
    return int(s, 2)


def test_example1_chinese_words_6_bits():
    hashes, weights = [b("100101"), b("101011")], [4, 5]  # 美国, 51区
    assert simhash_vector(hashes, weights, bits=6).tolist() == [9, -9, 1, -1, 1, 9]
    assert format(simhash(hashes, weights, bits=6), "06b") == "101011"


def test_example2_pm1_vectors_3_dims():
    vectors = [(1, -1, 1), (-1, 1, 1), (1, -1, -1), (-1, -1, 1), (1, 1, -1)]
    hashes = [b("".join("1" if x > 0 else "0" for x in v)) for v in vectors]
    weights = [1, 2, 0, 3, 0]
    assert simhash_vector(hashes, weights, bits=3).tolist() == [-4, -2, 6]
    assert format(simhash(hashes, weights, bits=3), "03b") == "001"


def test_example3_two_bits():
    # The issue writes V = (7.0, 3.0); under the stated rule (+w where the bit is 1,
    # -w where it is 0) V0 = 3 - 2 + 4 = 5, and no choice of signs of 3, 2, 4 makes 7.
    # The fingerprint, 11, is the same either way.
    v = simhash_vector([b("10"), b("01"), b("11")], [3.0, 2.0, 4.0], bits=2)
    assert v.tolist() == [5.0, 3.0]
    assert format(simhash([b("10"), b("01"), b("11")], [3.0, 2.0, 4.0], bits=2), "02b") == "11"


def test_example4_real_weights_8_bits():
    hashes, weights = [b("01011001"), b("11001011")], [45.11, 32.09]  # 上海, 北京
    v = simhash_vector(hashes, weights, bits=8)
    assert np.allclose(v, [-13.02, 77.20, -77.20, 13.02, 77.20, -77.20, -13.02, 77.20])
    assert format(simhash(hashes, weights, bits=8), "08b") == "01011001"


def test_64_bit_order_matches_per_bit_definition():
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, size=50, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 50).astype(np.uint64)
    weights = rng.random(50)
    fp = simhash(hashes, weights)
    for bit in range(64):  # bit index in the integer
        s = sum(w if (int(h) >> bit) & 1 else -w for h, w in zip(hashes, weights))
        assert ((fp >> bit) & 1) == (s > 0)


def test_single_feature_fingerprint_is_its_hash():
    assert simhash_features({"hello": 1.0}) == feature_hash("hello")


def test_feature_hash_is_mmh3_x64_first_half():
    import mmh3

    assert feature_hash("simhash") == mmh3.hash64("simhash", 0, signed=False)[0]
    assert 0 <= feature_hash("上海") < 2**64


def test_hamming_and_hex():
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1011, 0b0001) == 2
    assert to_hex(255) == "00000000000000ff"
    assert from_hex("ffffffffffffffff") == 2**64 - 1
    with pytest.raises(ValueError):
        from_hex("1" * 17)
    arr = np.array([0, 1, 3, 2**64 - 1], dtype=np.uint64)
    assert hamming_many(1, arr).tolist() == [1, 0, 1, 63]


def test_errors():
    with pytest.raises(ValueError):
        simhash([1, 2], [1.0])
    with pytest.raises(ValueError):
        simhash([1], [1.0], bits=65)
    with pytest.raises(ValueError):
        simhash_features({})


def test_sums_are_exact_so_order_never_matters():
    # 0.1 + 0.2 - 0.3 is 0 on paper but +-5e-17 in floats, with the sign set by the order of
    # the additions (and BLAS orders them differently on different CPUs). The sums here are
    # exact, so the bit is the same in every order.
    import itertools

    hashes = [b("1"), b("1"), b("0")]
    weights = [0.1, 0.2, 0.3]
    got = {simhash([hashes[i] for i in p], [weights[i] for i in p], bits=1) for p in itertools.permutations(range(3))}
    assert got == {0}
    rng = np.random.default_rng(7)
    h = rng.integers(0, 2**63, size=300, dtype=np.uint64)
    w = rng.choice([0.05, 0.1, 0.2, 0.25, 1.0, 3.0], size=300)
    fps = {simhash(h[p], w[p]) for p in (rng.permutation(300) for _ in range(20))}
    assert len(fps) == 1


def test_weights_must_be_finite():
    with pytest.raises(ValueError, match="finite"):
        simhash([1, 2], [1.0, float("nan")])
    with pytest.raises(ValueError, match="finite"):  # the compiled path declines, the Python one raises
        simhash(np.array([1, 2], dtype=np.uint64), np.array([1.0, np.inf]))


def test_compiled_64_bit_kernel_equals_the_bit_matrix():
    # the kernel simhash uses for uint64 hashes against the per-bit sums of _exact_sums,
    # with weights that cancel exactly (0.2 and 0.05 sums) and with random ones
    from scrapy_neardup.dedup.simhash import _exact_sums

    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        h = rng.integers(0, 2**64, size=n, dtype=np.uint64)
        if trial % 3 == 0:
            h[n // 2:] = h[: n - n // 2]  # repeated hashes: sums cancel
            w = rng.choice([0.05, 0.2, 1.0, 4.0], size=n)
        elif trial % 3 == 1:
            w = rng.random(n) * 10 ** rng.uniform(-3, 3)
        else:  # any scale, negative weights, and sizes past the compiled rounding (Python path)
            w = (rng.random(n) - 0.3) * 10 ** rng.uniform(-300, 300)
        v, _ = _exact_sums(h, w, 64)
        packed = np.packbits(v > 0)
        assert simhash(h, w, compiled=True) == int.from_bytes(packed.tobytes(), "big") == simhash(h, w, compiled=False)
