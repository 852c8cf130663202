"""Drawing ahead at the end of a job (Scheduler.tail_fill): the same draws, labels and estimates as the plain
schedule, in fewer requests, with the dropped continuations paid for and counted apart.

The fake engine replays a fixed table of outcomes indexed by (solution, prefix, draw number): a request's seed
says which draw it starts at (derive_seed), so both schedules see the same outcome for the same draw."""

from __future__ import annotations

import concurrent.futures
import random

import pytest

from graders.verdict import Verdict
from pipeline.labeling.ahead import SequenceLoad
from pipeline.labeling.scheduler import Scheduler, _Live, derive_seed
from pipeline.labeling.strategies import Probe, StrategyParams
from pipeline.labeling.types import Solution, StepStats
from rollouts.base import BackendStats, Completion, SamplingConfig

RUN_SEED = 7


class TableEngine:
    """Streaming fake engine: draw d of prefix i of solution s succeeds iff table[s.key][i][d]."""

    name = "table"
    streaming = True

    def __init__(self, table, keys):
        self.table = table
        self.stats = BackendStats()
        self.pool = concurrent.futures.ThreadPoolExecutor(4)
        self.seed_to_draw = {derive_seed(RUN_SEED, k, i, d): d
                             for k in keys for i in range(len(table[k])) for d in range(64)}

    def _one(self, r):
        step = r.prompt.split("Solution:\n", 1)[1].count("\n") - 1
        d0 = self.seed_to_draw[r.seed]
        row = self.table[r.group][step]
        return [Completion("\\boxed{GOLD}" if row[d0 + i] else "\\boxed{WRONG}", 10) for i in range(r.n)]

    def generate(self, requests, sampling):
        return [self._one(r) for r in requests]

    def submit(self, requests, sampling):
        return [self.pool.submit(self._one, r) for r in requests]

    def close(self):
        self.pool.shutdown()


def _grade(pairs):
    return [Verdict(("\\boxed{" + g + "}") in r, "numeric", "x") for g, r in pairs]


class _Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


def _corpus(n: int, seed: int):
    rng = random.Random(seed)
    sols, table = [], {}
    for i in range(n):
        m = rng.randint(3, 12)
        err = rng.randint(0, m)  # m = no error
        steps = tuple(f"step {j}" for j in range(m - 1)) + (
            "The answer is \\boxed{GOLD}." if err == m else "The answer is \\boxed{WRONG}.",)
        s = Solution(id=f"s{i}", problem=f"p{i}", answer="GOLD", steps=steps)
        rates = [rng.uniform(0.05, 0.9) if j < err else rng.choice([0.0, 0.02, 0.1]) for j in range(m)]
        table[s.key] = [[rng.random() < r for _ in range(64)] for r in rates]
        sols.append(s)
    return sols, table


def _label(sols, table, params, tail_fill, strategy="binary-search"):
    eng = TableEngine(table, [s.key for s in sols])
    sched = Scheduler(eng, _grade, _Plain(), SamplingConfig(), strategy, params, seed=RUN_SEED,
                      streaming=True, tail_fill=tail_fill)
    out = sched.label(sols)
    eng.close()
    return out, sched.stats


def _own(o):
    return o.labels, o.first_error, [(s.total, s.correct, s.first_n, s.first_correct) for s in o.stats]


@pytest.mark.parametrize("strategy,params", [
    ("binary-search", StrategyParams(k=20, wave_size=2, wave_growth=2.0)),  # the defaults' schedule
    ("binary-search", StrategyParams(k=8, wave_size=2, wave_growth=1.0, speculate=False, relative_drop=None)),
    ("adaptive", StrategyParams(k=12, wave_size=2, wave_growth=2.0)),
])
def test_drawing_ahead_keeps_every_draw_and_label_and_takes_fewer_requests(strategy, params):
    sols, table = _corpus(150, seed=3)
    plain, ps = _label(sols, table, params, tail_fill=0, strategy=strategy)
    ahead, st = _label(sols, table, params, tail_fill=100_000, strategy=strategy)  # room for every later wave
    assert [_own(o) for o in ahead] == [_own(o) for o in plain]
    assert st.drawn_ahead_dropped > 0 and ps.drawn_ahead_dropped == 0
    # what was dropped was generated: rollouts and tokens are the kept draws plus the dropped ones
    assert st.rollouts == ps.rollouts + st.drawn_ahead_dropped
    assert st.rollout_tokens == 10 * st.rollouts
    assert sum(o.rollouts for o in ahead) == st.rollouts
    assert st.requests < ps.requests


def test_drawing_ahead_stays_under_the_fill():
    sched = Scheduler(TableEngine({}, []), _grade, _Plain(), SamplingConfig(), "binary-search", StrategyParams(),
                      streaming=True, tail_fill=38, load=SequenceLoad())
    st = _Live(Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "c")), None,
               [Probe(0, 2, (4, 8, 6)), Probe(1, 2, (4, 8, 6))], [StepStats() for _ in range(3)])
    sched._draw_ahead(st)
    assert st.waves == [(2, 4, 8, 6), (2, 4, 8)]  # 38 - 4 own = 34: 18 for the first, 12 of the second's 18
    sched.load.add(34)  # the engine is busy: no room
    sched._draw_ahead(st)
    assert st.waves == [(2,), (2,)]
    off = Scheduler(TableEngine({}, []), _grade, _Plain(), SamplingConfig(), "binary-search", StrategyParams(),
                    streaming=True, tail_fill=0)
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
