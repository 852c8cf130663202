"""The first-error model (pipeline.stats.changepoint) against the truth: simulated solutions with known first
errors, parameters fitted by EM on one sample, calibration measured on a fresh one (issue 24)."""

from __future__ import annotations

import random

import pytest

from pipeline.stats.changepoint import DEFAULT, HAZARDS, Params, RowCounts, fit, posterior


def _simulate(n_rows: int, rng: random.Random) -> list[tuple[RowCounts, int]]:
    """Rows drawn from the model's own story: per-problem reliability s, hazards by position, dead prefixes
    that recover with a row's own small probability; 0-8 draws per sampled prefix."""
    hazards = (0.1, 0.2, 0.35, 0.5, 0.5, 0.5)
    out = []
    for _ in range(n_rows):
        m = rng.randint(3, 9)
        s = rng.betavariate(5, 2)
        q_dead = rng.betavariate(0.3, 15)
        wrong = rng.random() < 0.6
        if wrong:
            e = m - 1
            for j in range(m - 1):
                if rng.random() < hazards[min(j, HAZARDS - 1)]:
                    e = j
                    break
        else:
            e = -1 if rng.random() < 0.9 else rng.randrange(m - 1)
        counts = []
        for j in range(m):
            n = 0 if j == m - 1 else rng.choice([0, 2, 4, 8])
            p = s ** (m - 1 - j) if (e == -1 or j < e) else q_dead
            counts.append((sum(rng.random() < p for _ in range(n)), n))
        out.append((RowCounts(tuple(counts), not wrong), e))
    return out


def _calibration(rows, params, bins=5):
    table = [[0, 0.0, 0] for _ in range(bins)]
    for row, truth in rows:
        post = posterior(row, params)
        fe = max(range(len(post)), key=post.__getitem__) - 1  # the reported first error: the posterior's mode
        c = post[fe + 1]
        b = min(bins - 1, int(c * bins))
        table[b][0] += 1
        table[b][1] += c
        table[b][2] += fe == truth
    n = sum(t[0] for t in table)
    ece = sum(abs(t[1] - t[2]) for t in table) / n
    worst = max((abs(t[1] - t[2]) / t[0] for t in table if t[0] >= 30), default=0.0)
    return ece, worst


def test_fitted_model_is_calibrated_on_fresh_simulated_rows():
    rng = random.Random(2024)
    params = fit([row for row, _ in _simulate(500, rng)])
    ece, worst = _calibration(_simulate(1500, random.Random(99)), params)
    assert ece <= 0.05 and worst <= 0.10, (ece, worst)
    # the defaults (no fit) are worse: the fit is doing the work
    ece0, _ = _calibration(_simulate(1500, random.Random(99)), DEFAULT)
    assert ece0 > ece


def test_posterior_by_hand():
    """One sampled prefix at a uniform reliability prior is easy to follow: with a wrong answer and m = 2, the
    first error is step 0 or step 1 (the answer step); 0 of 4 at prefix 0 favours step 0 by the likelihood ratio."""
    import math

    from pipeline.stats.changepoint import GRID, LENGTH_BUCKETS, _log_bb

    p = Params(weights=((1.0,) + (0.0,) * (len(GRID) - 1),) * LENGTH_BUCKETS, dead_mean=0.02, dead_conc=2.0,
               hazards=(0.5,) * HAZARDS)

    s = GRID[0]  # the only reliability with weight: from prefix 0 one step remains, success s
    alive = (1 - s) ** 4
    dead = math.exp(_log_bb(0, 4, 0.02 * 2.0, 0.98 * 2.0))
    post = posterior(RowCounts(((0, 4), (0, 0)), False), p)
    assert post[0] == 0.0
    assert post[1] == pytest.approx(0.5 * dead / (0.5 * dead + 0.5 * alive))
    assert post[2] == pytest.approx(0.5 * alive / (0.5 * dead + 0.5 * alive))


def test_params_round_trip_and_refuse_another_grid():
    p = fit([row for row, _ in _simulate(60, random.Random(1))])
    assert Params.from_dict(p.to_dict()).to_dict() == p.to_dict()
    with pytest.raises(ValueError):
        Params.from_dict({**p.to_dict(), "weights": [1.0]})
    # a corpus fitted by changepoint-eb-2 (one mixing distribution for every length) stays readable
    flat = p.to_dict()["weights"][3]
    old = Params.from_dict({**p.to_dict(), "weights": flat})
    assert all(list(ws) == flat for ws in old.weights)
