"""Strategies on a scripted fake engine: exact labels and exact numbers of rollouts."""

from __future__ import annotations

import math

import pytest

from pipeline.labeling.strategies import ProbeResult, StrategyParams, _probe_point, make_strategy


def drive(name, alive, solution_correct, **kw):
    """Run a strategy where prefix i succeeds on every sample iff alive[i]. Returns (outcome, rollouts, probes)."""
    return _drive_draws(name, len(alive), solution_correct, lambda j, _i: alive[j], **kw)


def _drive_draws(name, m, solution_correct, outcome, **kw):
    """Run a strategy where the i-th own draw at step j succeeds iff ``outcome(j, i)``: a step's draws are the
    same whenever they are made. Returns (outcome, draws, rounds)."""
    gen = make_strategy(name, m, solution_correct, StrategyParams(**kw))
    made = [0] * m
    draws = rounds = 0
    try:
        probes = next(gen)
        while True:
            rounds += 1
            res = []
            for pr in probes:
                c = sum(outcome(pr.step, made[pr.step] + i) for i in range(pr.n))
                made[pr.step] += pr.n
                draws += pr.n
                res.append(ProbeResult(pr.step, pr.n, c, 0, 10 * pr.n))
            probes = gen.send(res)
    except StopIteration as stop:
        return stop.value, draws, rounds


def test_per_step_counts_and_labels():
    oc, rollouts, rounds = drive("per-step", [True, True, False, False, False], False, k=8)
    assert rollouts == 4 * 8 and rounds == 1
    assert oc.labels == [True, True, False, False, False]
    assert oc.first_error == 2
    assert [s.total for s in oc.stats] == [8, 8, 8, 8, 0]


def test_per_step_last_step_is_the_answer():
    oc, rollouts, _ = drive("per-step", [True, True, True], True, k=4)
    assert rollouts == 8 and oc.labels == [True, True, True] and oc.first_error == -1
    oc, _, _ = drive("per-step", [True, True, True], None, k=4)
    assert oc.labels == [True, True, None] and oc.first_error == -1


def test_single_step_solution_needs_no_rollouts():
    oc, rollouts, rounds = drive("per-step", [False], False, k=8)
    assert rollouts == 0 and rounds == 0 and oc.labels == [False] and oc.first_error == 0


@pytest.mark.parametrize("m,err", [(m, e) for m in (2, 3, 5, 8, 13) for e in (0, 1, 2, 4, 7, 12) if e < m])
@pytest.mark.parametrize("fraction", [0.5, 0.6, 0.75])
def test_binary_search_finds_first_error_in_log_probes(m, err, fraction):
    alive = [i < err for i in range(m)]
    oc, rollouts, rounds = drive("binary-search", alive, False, k=8, early_stop=False, bisect_fraction=fraction)
    assert oc.first_error == err
    assert oc.labels[:err] == [True] * err and oc.labels[err] is False
    assert all(x is None for x in oc.labels[err + 1 :])
    assert rollouts == 8 * rounds
    # each probe keeps at most max(fraction, 1 - fraction) of the interval (+ rounding): O(log m) probes
    bound = math.ceil(math.log2(m)) if fraction == 0.5 else math.ceil(math.log(m) / math.log(1 / fraction)) + 1
    assert rounds <= bound if m > 1 else rounds == 0
    # mc_value kept where estimated
    for i, st in enumerate(oc.stats):
        if st.total:
            assert st.value == (1.0 if alive[i] else 0.0)


def test_binary_search_exact_rollouts():
    # 8 steps, last step dead (answer wrong), first error at 5: bisection over (-1, 7): mid 3 alive, 5 dead, 4 alive
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, early_stop=False,
                                 bisect_fraction=0.5)
    assert (rounds, rollouts) == (3, 12)
    assert oc.first_error == 5
    assert [s.total for s in oc.stats] == [0, 0, 0, 4, 4, 4, 0, 0]
    # early stop: an alive probe ends at its first successful wave of 2, a dead one needs all 4
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, wave_size=2,
                                 bisect_fraction=0.5, speculate=False)
    assert (rounds, rollouts) == (4, 8)
    assert oc.first_error == 5
    assert [s.total for s in oc.stats] == [0, 0, 0, 2, 2, 4, 0, 0]
    # speculation (the default): probe 3's round also samples 1 and 5 (the next probe either way), probe 5's
    # round 4 and 6; probe 4 is then decided by its speculative wave, without a round of its own
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, wave_size=2,
                                 bisect_fraction=0.5)
    assert (rounds, rollouts) == (2, 12)
    assert oc.first_error == 5 and oc.labels == [True] * 5 + [False, None, None]
    assert [s.total for s in oc.stats] == [0, 2, 0, 2, 2, 4, 2, 0]
    # leaning late (0.6 of the way): 4 alive, then 6 dead, then 5 dead
    oc, rollouts, rounds = drive("binary-search", [True] * 5 + [False] * 3, False, k=4, early_stop=False,
                                 bisect_fraction=0.6)
    assert (rounds, rollouts, oc.first_error) == (3, 12, 5)
    assert [s.total for s in oc.stats] == [0, 0, 0, 0, 4, 4, 4, 0]


def test_probe_point_is_strictly_inside_and_leans_late():
    for lo in range(-1, 5):
        for hi in range(lo + 2, lo + 12):
            for f in (0.0, 0.3, 0.5, 0.6, 0.9, 1.0):
                assert lo < _probe_point(lo, hi, f) < hi
            assert _probe_point(lo, hi, 0.6) >= _probe_point(lo, hi, 0.5)
    assert [_probe_point(-1, 7, f) for f in (0.5, 0.6, 0.75)] == [3, 4, 5]
    from pipeline.config import LabelConfig

    # the strategies' defaults are the label command's (issue 16: the probe point 0.6, the relative drop 0.25)
    c, sp = LabelConfig(), StrategyParams()
    assert (sp.k, sp.bisect_fraction, sp.relative_drop) == (c.k, c.bisect_fraction, c.relative_drop)


@pytest.mark.parametrize("m,err", [(5, 0), (5, 2), (9, 7), (13, 4)])
def test_binary_search_early_stop_same_decisions(m, err):
    alive = [i < err for i in range(m)]
    # (without the relative drop, which lowers K after a live probe: test_relative_drop_*)
    full, r_full, _ = drive("binary-search", alive, False, k=8, early_stop=False, relative_drop=None)
    early, r_early, _ = drive("binary-search", alive, False, k=8, wave_size=1, relative_drop=None,
                              speculate=False, wave_growth=1.0)
    assert early.labels == full.labels and early.first_error == full.first_error == err
    n_alive = sum(1 for st in full.stats if st.total and st.correct)
    n_dead = sum(1 for st in full.stats if st.total and not st.correct)
    assert r_early == n_alive * 1 + n_dead * 8
    assert r_early < r_full if n_alive else r_early == r_full


def test_trust_correct_skips_rollouts():
    for name in ("binary-search", "adaptive", "per-step"):
        oc, rollouts, rounds = drive(name, [True] * 4, True, k=8, trust_correct=True)
        assert (rollouts, rounds) == (0, 0) and oc.labels == [True] * 4 and oc.first_error == -1


def test_binary_search_without_trust_checks_correct_solutions():
    oc, rollouts, _ = drive("binary-search", [True, False, True, True], True, k=2, trust_correct=False,
                            bisect_fraction=0.5)
    assert oc.first_error == 1 and rollouts > 0
    # leaning late, the live step 2 is probed first and settles step 1 as alive (prefixes are monotone)
    oc, rollouts, _ = drive("binary-search", [True, False, True, True], True, k=2, trust_correct=False,
                            bisect_fraction=0.6)
    assert oc.first_error == -1 and rollouts > 0


def test_adaptive_waves_stop_early():
    # steps 0,1 alive (one wave of 2 each), step 2 dead (k=8 failures in waves of 2, 4, 2), steps 3-4 never sampled
    oc, rollouts, rounds = drive("adaptive", [True, True, False, False, False], False, k=8, wave_size=2)
    assert oc.labels == [True, True, False, None, None]
    assert oc.first_error == 2
    assert (rollouts, rounds) == (2 + 2 + 8, 1 + 1 + 3)
    # equal waves (--wave-growth 1, the schedule before issue 29): the dead step takes 4 rounds
    flat, r_flat, rounds_flat = drive("adaptive", [True, True, False, False, False], False, k=8, wave_size=2,
                                      wave_growth=1.0)
    assert flat.labels == oc.labels and (r_flat, rounds_flat) == (12, 6)
    assert [s.total for s in oc.stats] == [2, 2, 8, 0, 0]
    # the same hard labels and first error as per-step on the same prefixes
    ps, r_ps, _ = drive("per-step", [True, True, False, False, False], False, k=8)
    assert ps.first_error == oc.first_error and ps.labels[:3] == oc.labels[:3] and r_ps == 32


def test_adaptive_confidence_width_keeps_sampling_positive_steps():
    # all successes: Wilson width shrinks with n; with width 0.5 a positive step needs several waves
    oc, rollouts, _ = drive("adaptive", [True, True, True], True, k=16, wave_size=2, confidence_width=0.5)
    assert oc.labels == [True, True, True]
    assert all(2 <= s.total <= 16 for s in oc.stats[:2])
    oc2, rollouts2, _ = drive("adaptive", [True, True, True], True, k=16, wave_size=2)
    assert rollouts2 == 4 and rollouts > rollouts2


def test_sequential_bisects_and_stops_when_decided():
    # wrong final answer, every interior prefix alive: the posterior's most uncertain step is the bisection point
    # (step 1 of e in 0..4), then 2, then 3; one wave of 2 each decides "first error = the last step"
    oc, rollouts, rounds = drive("sequential", [True] * 5, False, k=8, wave_size=2)
    assert (rollouts, rounds) == (6, 3) and [s.total for s in oc.stats] == [0, 2, 2, 2, 0]
    assert oc.labels == [True, True, True, True, False] and oc.first_error == 4
    assert oc.extra["label_status"] == "decided" and oc.extra["posterior"] >= 0.9


def test_sequential_records_exhaustion_and_budget():
    # a dead step 2 after live steps: 0 of 8 is weak evidence under the Jeffreys alive prior, so the uncertain
    # steps reach K = 8 without 0.9 confidence; the answer is still the most probable first error, flagged
    oc, rollouts, rounds = drive("sequential", [True, True, False, False, False], False, k=8, wave_size=2)
    assert (rollouts, rounds) == (24, 12) and [s.total for s in oc.stats] == [0, 8, 8, 8, 0]
    assert oc.labels == [True, True, False, None, None] and oc.first_error == 2
    assert oc.extra["label_status"] == "exhausted" and oc.extra["posterior"] < 0.9
    # a token budget (10 tokens per rollout in this fake): stops after the wave that crosses it; steps 3 and 4
    # are then equally probable first errors -> the earlier is reported and the tie recorded
    oc, rollouts, rounds = drive("sequential", [True] * 5, False, k=8, wave_size=2, max_tokens_per_solution=30)
    assert (rollouts, rounds) == (4, 2) and oc.extra["label_status"] == "budget,tie" and oc.first_error == 3
    oc, rollouts, rounds = drive("sequential", [True] * 3, None, k=8, max_tokens_per_solution=0)
    assert (rollouts, rounds) == (0, 0) and oc.extra["label_status"] == "budget,tie"


def test_sequential_trust_correct_and_correct_solutions():
    oc, rollouts, rounds = drive("sequential", [True] * 4, True, k=8, trust_correct=True)
    assert (rollouts, rounds) == (0, 0) and oc.first_error == -1
    # without trust, a right final answer alone makes "no error" the most probable (prior 1/5 vs eps for others)
    oc, rollouts, _ = drive("sequential", [True] * 4, True, k=8)
    assert rollouts == 0 and oc.first_error == -1 and oc.extra["label_status"] == "decided"


def _drive_rates(successes_at, n_steps, **kw):
    """binary-search where prefix i's first success comes on draw successes_at[i] (None: never)."""
    gen = make_strategy("binary-search", n_steps, False, StrategyParams(**kw))
    seen = [0] * n_steps
    probes_seen = []
    try:
        probes = next(gen)
        while True:
            res = []
            for pr in probes:
                probes_seen.append((pr.step, pr.n))
                first = successes_at[pr.step]
                draws = range(seen[pr.step] + 1, seen[pr.step] + pr.n + 1)
                ok = sum(1 for d in draws if first is not None and d >= first and (d - first) % 4 == 0)
                seen[pr.step] += pr.n
                res.append(ProbeResult(pr.step, pr.n, ok, 0, pr.n))
            probes = gen.send(res)
    except StopIteration as stop:
        return stop.value, probes_seen


def test_relative_drop_turns_a_rare_recovery_into_an_error():
    # 10 steps, answer wrong. Prefixes 0-5 succeed at once; prefix 6 (the first error) recovers on its 15th draw.
    at = [1] * 6 + [15, None, None, None]
    oc, _ = _drive_rates(at, 10, k=20, wave_size=1, relative_drop=None, bisect_fraction=0.6)
    assert oc.first_error == 7  # any success is alive: the rare recovery hides the error
    oc, probes = _drive_rates(at, 10, k=20, wave_size=1, relative_drop=0.25, bisect_fraction=0.6)
    assert oc.first_error == 6
    # against a live prefix that succeeded on its first draw, a probe stops after 7 failures (a success on the
    # 8th would be under 0.25 x its rate anyway)
    assert sum(n for s, n in probes if s == 6) == 7


def test_relative_drop_keeps_a_slow_but_steady_prefix_alive():
    # a hard problem: every correct prefix succeeds only on its 12th draw; the first error is at 6
    at = [12] * 6 + [None] * 4
    oc, _ = _drive_rates(at, 10, k=20, wave_size=1, relative_drop=0.25, bisect_fraction=0.6)
    assert oc.first_error == 6


@pytest.mark.parametrize("growth", [1.0, 2.0])
def test_speculation_and_growing_waves_keep_the_labels_and_shorten_the_rounds(growth):
    """Issue 29: speculation (the next candidates' first waves ride along) and growing waves change when draws are
    made, never which draws decide a label: with each step's draw sequence fixed, the labels and first error are
    those of the plain search, on random solutions, with no more rounds (and fewer in total)."""
    import random

    rng = random.Random(5)
    rounds_plain = rounds_spec = 0
    for t in range(300):
        m = rng.randint(2, 10)
        err = rng.randint(-1, m - 1)
        sc = err == -1
        ps = [(rng.choice([0.05, 0.3, 0.7, 0.95]) if err == -1 or j < err else rng.choice([0.0, 0.02, 0.1]))
              for j in range(m)]
        seed = rng.random()

        def outcome(j, i, ps=ps, seed=seed):
            return random.Random(f"{seed}-{j}-{i}").random() < ps[j]

        plain, _d0, r0 = _drive_draws("binary-search", m, sc, outcome, speculate=False, wave_growth=1.0,
                                      trust_correct=False)
        spec, _d1, r1 = _drive_draws("binary-search", m, sc, outcome, speculate=True, wave_growth=growth,
                                     trust_correct=False)
        assert (spec.labels, spec.first_error) == (plain.labels, plain.first_error), t
        assert r1 <= r0, t
        rounds_plain += r0
        rounds_spec += r1
    # measured: 0.90 with equal waves (speculation alone), 0.40 with waves growing 2x
    assert rounds_spec < (0.95 if growth == 1.0 else 0.5) * rounds_plain
