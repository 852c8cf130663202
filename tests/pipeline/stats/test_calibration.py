"""ECE and AUROC of a stated probability, checked against simulated rows whose truth is known."""

from __future__ import annotations

import random

import pytest

from pipeline.stats.calibration import auroc, ece


def _pairwise_auroc(scores, right):
    pos = [s for s, ok in zip(scores, right) if ok]
    neg = [s for s, ok in zip(scores, right) if not ok]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_auroc_is_the_pairwise_probability_with_ties(seed):
    rng = random.Random(seed)
    scores = [rng.choice([0.1, 0.2, 0.5, 0.5, 0.9, rng.random()]) for _ in range(300)]
    right = [rng.random() < 0.3 + 0.5 * s for s in scores]
    assert auroc(scores, right) == pytest.approx(_pairwise_auroc(scores, right), abs=1e-12)


def test_auroc_edges():
    assert auroc([0.1, 0.9], [False, True]) == 1.0
    assert auroc([0.1, 0.9], [True, False]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [True, False, True]) == 0.5
    assert auroc([0.2, 0.8], [True, True]) is None and auroc([], []) is None


def test_calibrated_rows_show_small_ece_and_overconfident_ones_do_not():
    """Rows right with exactly their stated probability (fresh draws) give an ECE near 0; stating a higher
    number for the same rows raises the ECE but leaves the AUROC unchanged (a monotone map keeps the ranking)."""
    rng = random.Random(7)
    stated = [rng.random() for _ in range(20000)]
    right = [rng.random() < p for p in stated]
    assert ece(stated, right) < 0.02
    inflated = [p ** 0.3 for p in stated]
    assert ece(inflated, right) > 0.15
    assert auroc(inflated, right) == pytest.approx(auroc(stated, right), abs=1e-12)
    # a score drawn independently of the truth ranks at chance
    noise = [rng.random() for _ in stated]
    assert auroc(noise, right) == pytest.approx(0.5, abs=0.02)
    # the true probability ranks as well as the data allow: E[AUROC] for p ~ U(0,1), right ~ Bernoulli(p) is 5/6
    assert auroc(stated, right) == pytest.approx(5 / 6, abs=0.01)


def test_ece_bins_by_stated_value():
    assert ece([0.95, 0.95, 0.05, 0.05], [True, True, False, False]) == pytest.approx(0.05)
    assert ece([1.0], [False]) == pytest.approx(1.0)  # 1.0 falls in the top bin
    assert ece([], []) is None
