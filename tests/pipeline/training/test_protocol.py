"""The PRM evaluation protocol's statistics against known truth: AUROC of scores with a known population AUROC,
the cross-fitted threshold on data whose best threshold is known, and the paired bootstrap interval's coverage
under the sampling that produced the data."""

from __future__ import annotations

import math
import random

import pytest

from pipeline.training.protocol import Scored, cross_fit, half_of, measure, paired, step_auroc


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def binormal_solutions(rng: random.Random, n: int, d: float, n_steps: int = 6, p_err: float = 0.5,
                       tag: str = "") -> list[Scored]:
    """Solutions whose good steps score sigmoid(N(d, 1)) and wrong ones sigmoid(N(0, 1)): the population step
    AUROC is Phi(d / sqrt 2) (a monotone map keeps the ranking)."""
    out = []
    for i in range(n):
        fe = rng.randrange(n_steps) if rng.random() < p_err else -1
        scores = []
        for j in range(n_steps):
            good = fe == -1 or j < fe
            scores.append(_sigmoid(rng.gauss(d if good else 0.0, 1.0)))
        out.append(Scored(f"{tag}{i}", f"problem {tag}{i}", scores, fe))
    return out


def test_step_auroc_matches_the_binormal_truth():
    rng = random.Random(11)
    for d in (0.0, 0.8, 1.6):
        got = step_auroc(binormal_solutions(rng, 3000, d))
        # about 9,000 good and 4,500 wrong steps: the estimate's SD is under 0.006
        assert got == pytest.approx(_phi(d / math.sqrt(2)), abs=0.02), d


def test_auroc_reads_only_steps_up_to_the_reference_error():
    # the steps after the first error carry no reference label: a high score there must not count
    s = [Scored("a", "p", [0.9, 0.1, 0.99, 0.99], 1), Scored("b", "q", [0.8, 0.7], -1)]
    assert step_auroc(s) == 1.0
    s2 = [Scored("a", "p", [0.9, 0.1, 0.99, 0.99], 1), Scored("b", "q", [0.05, 0.7], -1)]
    # good steps 0.9, 0.05, 0.7 against the one wrong 0.1: two of three above
    assert step_auroc(s2) == pytest.approx(2 / 3)


def test_halves_are_fixed_by_the_problem_text_and_split_it_about_evenly():
    probs = [f"problem number {i}" for i in range(4000)]
    h = [half_of(p) for p in probs]
    assert h == [half_of(p + "  ") for p in probs]  # stripped text, the same in every run
    assert abs(sum(h) / len(h) - 0.5) < 0.03


def test_cross_fitted_threshold_finds_a_threshold_far_from_one_half():
    # good steps score in (0.3, 1), wrong ones in (0, 0.25): every threshold in (0.25, 0.3] separates them
    rng = random.Random(3)
    sols = []
    for i in range(400):
        fe = rng.randrange(4) if i % 2 else -1
        scores = [rng.uniform(0.3, 1) if fe == -1 or j < fe else rng.uniform(0, 0.25) for j in range(4)]
        sols.append(Scored(str(i), f"p{i}", scores, fe))
    cf = cross_fit(sols)
    assert cf["f1"] == 1.0
    assert all(0.25 <= x["threshold"] <= 0.3 for x in cf["halves"])
    assert {x["chosen_on"] for x in cf["halves"]} == {x["read_on"] for x in cf["halves"]}
    m = measure(sols, own_threshold=0.28)
    assert m["f1_own"] == 1.0 and m["f1_cross"] == 1.0 and m["f1_oracle"] == 1.0
    assert m["f1_at_0.5"] < 0.9  # good steps between 0.3 and 0.5 are flagged there
    assert m["step_auroc"] == 1.0


def test_cross_fit_is_none_when_a_half_lacks_a_kind():
    sols = [Scored(str(i), f"p{i}", [0.9, 0.8], -1) for i in range(20)]
    assert cross_fit(sols)["f1"] is None


def test_paired_bootstrap_interval_covers_the_true_difference():
    """Datasets drawn from two known PRMs on the same solutions: A's good steps at N(1.2, 1), B's at N(0.6, 1),
    errors at N(0, 1); the true AUROC difference is Phi(1.2/sqrt2) - Phi(0.6/sqrt2). The F1 difference at 0.5
    is taken from one very large draw. The 90% interval should cover each in about 90% of 120 datasets."""
    rng = random.Random(5)

    def dataset(n):
        a, b = [], []
        for i in range(n):
            fe = rng.randrange(5) if rng.random() < 0.5 else -1
            za, zb = [], []
            for j in range(5):
                good = fe == -1 or j < fe
                e = rng.gauss(0, 1)  # a shared part: the two PRMs' errors are correlated, as on one solution set
                za.append(_sigmoid((1.2 if good else -0.3) + 0.7 * e + 0.7 * rng.gauss(0, 1)))
                zb.append(_sigmoid((0.6 if good else -0.3) + 0.7 * e + 0.7 * rng.gauss(0, 1)))
            a.append(Scored(str(i), f"p{i}", za, fe))
            b.append(Scored(str(i), f"p{i}", zb, fe))
        return a, b

    big_a, big_b = dataset(40_000)
    true_auroc = step_auroc(big_a) - step_auroc(big_b)
    true_f1 = measure(big_a, None)["f1_at_0.5"] - measure(big_b, None)["f1_at_0.5"]
    cover_auc = cover_f1 = 0
    runs = 120
    for r in range(runs):
        a, b = dataset(150)
        d = paired(a, b, n_boot=400, seed=r, level=0.9)["differences"]
        cover_auc += d["step_auroc"]["low"] <= true_auroc <= d["step_auroc"]["high"]
        cover_f1 += d["f1_at_0.5"]["low"] <= true_f1 <= d["f1_at_0.5"]["high"]
    # binomial SD of the coverage over 120 runs at 0.9 is 0.027: [0.80, 0.97] is about 3.5 SD either side
    assert 0.80 <= cover_auc / runs <= 0.97, cover_auc
    assert 0.80 <= cover_f1 / runs <= 0.97, cover_f1


def test_paired_is_seeded_and_zero_against_itself():
    rng = random.Random(1)
    a = binormal_solutions(rng, 200, 1.0)
    x = paired(a, a, 0.5, 0.5, n_boot=200, seed=4)
    assert x["differences"]["step_auroc"]["difference"] == 0.0
    assert x["differences"]["step_auroc"]["high"] == 0.0 and x["differences"]["f1_own"]["se"] == 0.0
    b = binormal_solutions(rng, 200, 0.5)
    b = [Scored(s.id, t.problem, s.scores, t.truth) for s, t in zip(b, a, strict=True)]
    one, two = paired(a, b, n_boot=200, seed=4), paired(a, b, n_boot=200, seed=4)
    assert one["differences"] == two["differences"]
    assert paired(a, b, n_boot=200, seed=5)["differences"] != one["differences"]


def test_paired_bootstrap_agrees_with_the_point_estimate_on_equal_weights():
    # every resample weights problems by their draw counts; the mean of many resamples' AUROC is near the
    # point estimate, and the full-weight statistic is exactly it (the weighted code path, checked)
    import numpy as np

    from pipeline.training.protocol import _Design

    rng = random.Random(2)
    a = binormal_solutions(rng, 120, 1.0)
    d = _Design(a, list(range(len(a))), {"t": 0.5})
    ones = np.ones((1, len(a)))
    assert d.auroc(ones)[0] == pytest.approx(step_auroc(a))
    assert d.f1(ones, "t")[0] == pytest.approx(measure(a, 0.5)["f1_own"])


def test_paired_refuses_other_solutions():
    from pipeline.training.protocol import ProtocolError

    a = [Scored("x", "p", [0.5, 0.5], -1)]
    with pytest.raises(ProtocolError, match="same solutions"):
        paired(a, [Scored("x", "p", [0.5], -1)])
    with pytest.raises(ProtocolError, match="share no solution"):
        paired(a, [Scored("y", "p", [0.5, 0.5], -1)])
