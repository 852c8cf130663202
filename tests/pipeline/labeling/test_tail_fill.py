"""Drawing ahead at the end of a job (Scheduler.tail_fill): the same draws, labels and estimates as the plain
schedule, in fewer rounds, with the dropped continuations paid for and counted apart.

The fake engine seeds the way vLLM does: sample i of a request with seed s is the sample of seed s + i, per
request, whatever the request's n or the rest of the batch. A wave drawn ahead inside a larger request would
then sample other continuations than the plain schedule's wave; each wave must be its own request with the
plain schedule's seed."""

from __future__ import annotations

import concurrent.futures
import random

import pytest

from graders.verdict import Verdict
from pipeline.labeling.ahead import SequenceLoad, join_waves
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings, _Live, derive_seed
from pipeline.labeling.strategies import Probe, StrategyParams
from pipeline.solution import Solution, StepStats
from rollouts.base import BackendStats, Completion

RUN_SEED = 7


class SeedEngine:
    """Streaming fake engine, seeded as vLLM seeds: sample i of a request (prompt, seed s) succeeds iff a
    generator seeded with (prompt, s + i) draws under the prefix's success rate ``rates[key][step]``."""

    name = "seeded"
    streaming = True

    def __init__(self, rates):
        self.rates = rates
        self.stats = BackendStats()
        self.pool = concurrent.futures.ThreadPoolExecutor(4)
        self.submits = 0  # submit() calls: one per solution's round

    @staticmethod
    def sample(prompt: str, seed: int, rate: float) -> bool:
        return random.Random(f"{prompt}|{seed}").random() < rate

    def _one(self, r):
        step = r.prompt.split("Solution:\n", 1)[1].count("\n") - 1
        rate = self.rates[r.group][step]
        return [Completion("\\boxed{GOLD}" if self.sample(r.prompt, r.seed + i, rate) else "\\boxed{WRONG}", 10)
                for i in range(r.n)]

    def generate(self, requests, sampling):
        return [self._one(r) for r in requests]

    def submit(self, requests, sampling):
        self.submits += 1
        return [self.pool.submit(self._one, r) for r in requests]

    def close(self):
        self.pool.shutdown()


class JitteryLoad(SequenceLoad):
    """Engine load as a probe sees it when it is sent: anything from idle to full (seeded), so whether a probe
    draws ahead, and how many of its waves, varies from probe to probe."""

    def __init__(self, seed: int, high: int):
        super().__init__()
        self.rng = random.Random(seed)
        self.high = high

    @property
    def value(self) -> int:
        return self.rng.randint(0, self.high)


def _grade(pairs):
    return [Verdict(("\\boxed{" + g + "}") in r, "numeric", "x") for g, r in pairs]


class _Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


def _corpus(n: int, seed: int):
    rng = random.Random(seed)
    sols, rates = [], {}
    for i in range(n):
        m = rng.randint(3, 12)
        err = rng.randint(0, m)  # m = no error
        steps = tuple(f"step {j}" for j in range(m - 1)) + (
            "The answer is \\boxed{GOLD}." if err == m else "The answer is \\boxed{WRONG}.",)
        s = Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD", steps=steps)
        rates[s.key] = [rng.uniform(0.05, 0.9) if j < err else rng.choice([0.0, 0.02, 0.1]) for j in range(m)]
        sols.append(s)
    return sols, rates


def _label(sols, rates, params, tail_fill, strategy="binary-search", load=None):
    eng = SeedEngine(rates)
    sched = Scheduler(eng, _grade, _Plain(),
                      SchedulerSettings(strategy, params, seed=RUN_SEED, streaming=True, tail_fill=tail_fill), load=load)
    out = sched.label(sols)
    eng.close()
    return out, sched.stats, eng.submits


def _own(o):
    return o.labels, o.first_error, [(s.total, s.correct, s.first_n, s.first_correct) for s in o.stats]


SCHEDULES = [
    ("binary-search", StrategyParams(k=20, wave_size=2, wave_growth=2.0)),  # the defaults' schedule
    ("binary-search", StrategyParams(k=8, wave_size=2, wave_growth=1.0, speculate=False, relative_drop=None)),
    ("adaptive", StrategyParams(k=12, wave_size=2, wave_growth=2.0)),
]


@pytest.mark.parametrize("strategy,params", SCHEDULES)
def test_drawing_ahead_keeps_every_draw_and_label_and_takes_fewer_rounds(strategy, params):
    sols, rates = _corpus(150, seed=3)
    plain, ps, p_submits = _label(sols, rates, params, tail_fill=0, strategy=strategy)
    ahead, st, a_submits = _label(sols, rates, params, tail_fill=100_000, strategy=strategy)  # room for every wave
    assert [_own(o) for o in ahead] == [_own(o) for o in plain]
    assert st.drawn_ahead_dropped > 0 and ps.drawn_ahead_dropped == 0
    # what was dropped was generated: rollouts and tokens are the kept draws plus the dropped ones
    assert st.rollouts == ps.rollouts + st.drawn_ahead_dropped
    assert st.rollout_tokens == 10 * st.rollouts
    assert sum(o.rollouts for o in ahead) == st.rollouts
    assert a_submits < p_submits  # fewer rounds per solution (one submit() per solution's round)


@pytest.mark.parametrize("strategy,params", SCHEDULES)
@pytest.mark.parametrize("load_seed", [0, 1, 2])
def test_labels_do_not_depend_on_engine_load(strategy, params, load_seed):
    """Whether a probe draws ahead depends on the engine's load when it is sent (timing); the labels, counts
    and estimates must not: with vLLM's seeding, under load varying from probe to probe, they are
    ``--tail-fill 0``'s for the same seed."""
    sols, rates = _corpus(150, seed=3)
    plain, _ps, _ = _label(sols, rates, params, tail_fill=0, strategy=strategy)
    ahead, st, _ = _label(sols, rates, params, tail_fill=40, strategy=strategy, load=JitteryLoad(load_seed, 40))
    assert st.drawn_ahead_dropped > 0  # some probes drew ahead, others did not
    assert [_own(o) for o in ahead] == [_own(o) for o in plain]


def test_each_wave_is_its_own_request_with_the_plain_schedules_seed():
    sched = Scheduler(SeedEngine({}), _grade, _Plain(),
                      SchedulerSettings("binary-search", StrategyParams(), streaming=True, seed=RUN_SEED))
    sol = Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "c"))
    stats = [StepStats() for _ in range(3)]
    stats[1].total = 3  # draws the step already had
    st = _Live(sol, None, [Probe(0, 2, (4, 8)), Probe(1, 2, (4,))], stats)
    st.waves = [(2, 4, 8), (2,)]
    reqs = sched._requests(st)
    assert [(r.n, r.seed) for r in reqs] == [
        (2, derive_seed(RUN_SEED, sol.key, 0, 0)), (4, derive_seed(RUN_SEED, sol.key, 0, 2)),
        (8, derive_seed(RUN_SEED, sol.key, 0, 6)), (2, derive_seed(RUN_SEED, sol.key, 1, 3))]
    assert len({r.prompt for r in reqs[:3]}) == 1 and reqs[3].prompt != reqs[0].prompt
    assert join_waves(st.waves, [["a"] * 2, ["b"] * 4, ["c"] * 8, ["d"] * 2]) == [
        ["a"] * 2 + ["b"] * 4 + ["c"] * 8, ["d"] * 2]


def test_drawing_ahead_stays_under_the_fill():
    sched = Scheduler(SeedEngine({}), _grade, _Plain(),
                      SchedulerSettings("binary-search", StrategyParams(), streaming=True, tail_fill=38), load=SequenceLoad())
    st = _Live(Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "c")), None,
               [Probe(0, 2, (4, 8, 6)), Probe(1, 2, (4, 8, 6))], [StepStats() for _ in range(3)])
    sched._draw_ahead(st)
    assert st.waves == [(2, 4, 8, 6), (2, 4, 8)]  # 38 - 4 own = 34: 18 for the first, 12 of the second's 18
    sched.load.add(34)  # the engine is busy: no room
    sched._draw_ahead(st)
    assert st.waves == [(2,), (2,)]
    off = Scheduler(SeedEngine({}), _grade, _Plain(),
                    SchedulerSettings("binary-search", StrategyParams(), streaming=True, tail_fill=0))
    off._draw_ahead(st)
    assert st.waves == [(2,), (2,)]


def test_later_waves_are_the_rest_of_the_schedule():
    import dataclasses

    from pipeline.labeling.strategies import _later_waves

    p = StrategyParams(k=20, wave_size=2, wave_growth=2.0)
    assert _later_waves(2, p, True) == (4, 8, 6)
    assert _later_waves(6, p, True) == (8, 6)
    assert _later_waves(20, p, True) == ()
    assert _later_waves(2, p, False) == ()  # fixed K: one probe of K, nothing later
    assert _later_waves(2, dataclasses.replace(p, confidence_width=0.2), True) == ()  # decided otherwise
