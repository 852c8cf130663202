"""Reach gating (binary-search with reach_gate) on a scripted fake engine: exact rollout counts per case, the
bare problem drawn once per problem and shared by its solutions, deterministic seeds, label invariants."""

from __future__ import annotations

import pytest

from graders.verdict import Verdict
from pipeline.labeling.reach import problem_key
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings, derive_seed
from pipeline.labeling.strategies import BARE, StrategyParams, make_strategy
from pipeline.solution import REACH_SEARCHED, REACH_TRUSTED, UNREACHED, Solution
from rollouts.base import BackendStats, Completion

WRONG, RIGHT = "The answer is \\boxed{WRONG}.", "The answer is \\boxed{GOLD}."


class Scripted:
    """Fake engine: a prompt of problem p with i steps succeeds iff script[p][i] (index 0: the bare problem)."""

    name = "scripted"

    def __init__(self, script):
        self.script = script
        self.stats = BackendStats()
        self.requests = []

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            self.requests.append(r)
            problem = r.prompt.split("\n")[0][len("Problem: "):]
            steps = r.prompt.split("Solution:\n", 1)[1].count("\n")
            out.append([Completion(RIGHT if hit else WRONG, 5) for hit in self._draws(problem, steps, r.n)])
        return out

    def _draws(self, problem, steps, n):
        return [bool(self.script[problem][steps])] * n

    def close(self):
        pass


def _grade(pairs):
    return [Verdict(("\\boxed{" + g + "}") in r, "numeric", "x") for g, r in pairs]


class _Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


def _sol(i, problem, n, right):
    return Solution(id=f"s{i}", problem=problem, answer="GOLD",
                    steps=tuple(f"step {problem} {i} {j}" for j in range(n - 1)) + (RIGHT if right else WRONG,))


P = StrategyParams(k=4, wave_size=2, wave_growth=2.0, speculate=False, trust_correct=True, reach_gate=True,
                   relative_drop=None)


def _run(sols, script, params=P, seed=1):
    be = Scripted(script)
    sched = Scheduler(be, _grade, _Plain(), SchedulerSettings("binary-search", params, seed=seed))
    return sched.label(sols), sched, be


def _check_invariants(o):
    labels = o.labels
    assert len(labels) == len(o.solution.steps)
    first_false = next((i for i, x in enumerate(labels) if x is False), -1)
    assert o.first_error == first_false
    if o.first_error >= 0:  # nothing claimed after the first error
        assert all(x is None for x in labels[o.first_error + 1:])


def test_rollout_counts_per_case_exact():
    script = {
        "pA": [False] * 6,  # unreached: neither the bare problem nor any prefix reaches the answer
        "pB": [True] * 6,  # solved: a right answer is trusted
        "pC": [False, True, True, False, False, False],  # bare 0 of K, step 1 reaches: searched
        "pD": [False, True, True, True],  # right answer, pass rate 0 < threshold: searched, all alive
    }
    sols = [_sol(0, "pA", 5, False), _sol(1, "pA", 5, False), _sol(2, "pB", 5, True),
            _sol(3, "pC", 5, False), _sol(4, "pD", 3, True), _sol(5, "pA", 4, True)]
    out, sched, be = _run(sols, script)
    by = {o.solution.id: o for o in out}
    # pA: bare 4 (charged to s0, the first of pA), step 1 dead (waves 2 + 2), then the search goes on in case a
    # later prefix reaches the answer: step 3 dead (4), step 2 dead (4), step 1 already decided
    assert by["s0"].rollouts == 4 + 4 + 4 + 4 and by["s1"].rollouts == 12 and by["s5"].rollouts == 12
    assert by["s0"].extra["label_status"] == UNREACHED
    assert by["s0"].labels == [False, None, None, None, None] and by["s0"].first_error == 0
    # a right answer that is unreached: no claim about the steps, no error
    assert by["s5"].labels == [None] * 4 and by["s5"].first_error == -1
    assert by["s5"].extra["label_status"] == UNREACHED
    # pB: bare 4, trusted without any step's rollout
    assert by["s2"].rollouts == 4 and by["s2"].labels == [True] * 5
    assert by["s2"].extra["label_status"] == REACH_TRUSTED
    # pC: bare 4, step 1 alive (2), then bisection of (0, 4): step 3 dead (2 + 2), step 2 alive (2)
    assert by["s3"].rollouts == 4 + 2 + 4 + 2 and by["s3"].first_error == 2
    assert by["s3"].labels == [True, True, False, None, None]
    assert by["s3"].extra["label_status"] == REACH_SEARCHED
    # pD: bare 4, step 1 alive (2), then the search's next probe would be the full solution, alive by its own
    # right answer without a draw: all alive
    assert by["s4"].rollouts == 4 + 2 and by["s4"].labels == [True, True, True]
    # four problems, one bare request each, made before any step's
    bare = [r for r in be.requests if r.prompt.endswith("Solution:\n")]
    assert len(bare) == 4 and all(r.n == 4 for r in bare) and be.requests[:4] == bare
    assert sched.stats.rollouts == sum(o.rollouts for o in out) == 16 + 12 + 4 + 12 + 6 + 12
    assert sum(o.rollout_tokens for o in out) == 5 * sched.stats.rollouts
    for o in out:
        _check_invariants(o)


def test_bare_seeds_depend_on_the_problem_only():
    script = {"pA": [False] * 6, "pC": [False, True, True, False, False, False]}
    sols = [_sol(0, "pA", 5, False), _sol(1, "pC", 5, False), _sol(2, "pA", 5, False)]
    together, _, be = _run(sols, script, seed=7)
    alone = [_run([s], script, seed=7)[0][0] for s in sols]
    assert [(o.labels, o.first_error, o.extra) for o in together] == [(o.labels, o.first_error, o.extra) for o in alone]
    seeds = {r.seed for r in be.requests if r.prompt.endswith("Solution:\n")}
    assert seeds == {derive_seed(7, problem_key(p), BARE, 0) for p in ("pA", "pC")}
    # labeled alone, each solution pays for its problem's draws
    assert [o.rollouts for o in alone] == [16, 12, 16]


def test_trust_threshold_and_no_trust():
    script = {"pB": [True] * 6}
    sol = _sol(0, "pB", 5, True)
    (o,), _, _ = _run([sol], script)
    assert o.rollouts == 4 and o.extra["label_status"] == REACH_TRUSTED
    # a pass rate of 1 under a threshold above it: searched; --no-trust-correct: searched too
    for params in (P.__class__(**{**P.__dict__, "trust_pass_rate": 1.0 + 1e-9}),
                   P.__class__(**{**P.__dict__, "trust_correct": False})):
        (o,), _, _ = _run([sol], script, params)
        assert o.extra["label_status"] == REACH_SEARCHED and o.labels == [True] * 5 and o.rollouts > 4


def test_a_later_prefix_that_reaches_makes_the_row_searched():
    # the bare problem and step 1 fail, step 3's prefix reaches the answer: the search's labels, not "unreached"
    script = {"pE": [False, False, False, True, True, True]}
    (o,), _, _ = _run([_sol(0, "pE", 5, False)], script)
    assert o.extra["label_status"] == REACH_SEARCHED
    # bare 4, step 1 dead (4); the search (-1, 4): step 3 alive (2), step 4 alive (2): the last step is the error
    # step 1 keeps its 0 of K against the later live prefix: null, as binary-search leaves such a step
    assert o.rollouts == 4 + 4 + 2 + 2 and o.labels == [None, True, True, True, False] and o.first_error == 4
    _check_invariants(o)


def test_reach_gate_is_binary_search_only():
    with pytest.raises(ValueError, match="binary-search"):
        make_strategy("per-step", 3, False, P)


def test_all_ungradable_is_no_evidence():
    class Ungradable(Scripted):
        pass

    def grade(pairs):
        return [Verdict(None, "timeout", "x") for _ in pairs]

    be = Ungradable({"p": [False] * 4})
    sched = Scheduler(be, grade, _Plain(), SchedulerSettings("binary-search", P, seed=1))
    (o,) = sched.label([_sol(0, "p", 3, False)])
    # nothing was graded: never "unreached" (no draw says the completer fails), and no invented error
    assert o.extra["label_status"] == REACH_SEARCHED
    _check_invariants(o)


def test_unreached_claim_step1_claims_step_one_on_a_right_answer_too():
    script = {"pA": [False] * 6}
    params = P.__class__(**{**P.__dict__, "unreached_claim": "step1"})
    (o,), _, _ = _run([_sol(0, "pA", 4, True)], script, params)
    assert o.extra["label_status"] == UNREACHED and o.labels == [False, None, None, None] and o.first_error == 0
    assert o.rollouts == 4 + 4 + 4 + 4


# --reach-probe step1: step 1's own draws give the pass rate; no bare-problem draws
S1 = P.__class__(**{**P.__dict__, "reach_probe": "step1"})


class Fractional(Scripted):
    """Fake engine: prefix i of problem p succeeds at rate script[p][i]; the j-th draw at a prefix succeeds when
    floor((j + 1) * rate) > floor(j * rate) (evenly spread, the same sequence on every run)."""

    def __init__(self, script):
        super().__init__(script)
        self.drawn = {}

    def _draws(self, problem, steps, n):
        rate, hits = float(self.script[problem][steps]), []
        for _ in range(n):
            j = self.drawn.get((problem, steps), 0)
            self.drawn[(problem, steps)] = j + 1
            hits.append(int((j + 1) * rate + 1e-9) > int(j * rate + 1e-9))
        return hits


def _run_fractional(sols, script, params):
    be = Fractional(script)
    sched = Scheduler(be, _grade, _Plain(), SchedulerSettings("binary-search", params, seed=1))
    return sched.label(sols), sched, be


def test_step1_probe_draws_no_bare_problem_and_a_wrong_answer_pays_only_for_the_search():
    script = {"pA": [False] * 6, "pC": [False, True, True, False, False, False], "pB": [True] * 6}
    sols = [_sol(0, "pA", 5, False), _sol(1, "pC", 5, False), _sol(2, "pB", 5, True)]
    bare, _, _ = _run(sols, script)
    out, sched, be = _run(sols, script, S1)
    assert not [r for r in be.requests if r.prompt.endswith("Solution:\n")]  # no bare-problem request
    by, was = {o.solution.id: o for o in out}, {o.solution.id: o for o in bare}
    # a wrong answer: the same probes as with the bare problem, less its 4 draws, and the same labels
    for i in ("s0", "s1"):
        assert by[i].rollouts == was[i].rollouts - 4
        assert (by[i].labels, by[i].first_error, by[i].extra["label_status"]) == (
            was[i].labels, was[i].first_error, was[i].extra["label_status"])
    assert by["s0"].extra["label_status"] == UNREACHED and by["s1"].extra["label_status"] == REACH_SEARCHED
    # a right answer whose step 1 succeeds twice in its first wave of 2: 2 of K=4 settles trust at 0.5
    assert by["s2"].rollouts == 2 and by["s2"].extra["label_status"] == REACH_TRUSTED
    assert by["s2"].labels == [True] * 5 and by["s2"].extra["design"] == "first-wave"
    assert sched.stats.rollouts == sum(o.rollouts for o in out)
    for o in out:
        _check_invariants(o)


@pytest.mark.parametrize(("rate", "threshold", "draws", "status"), [
    (1.0, 0.5, 2, REACH_TRUSTED),  # 2 successes of 2: need ceil(0.5 * 4) = 2
    (0.5, 0.5, 4, REACH_TRUSTED),  # 0 + 1 ... 2 of 4: trusted at K
    (0.25, 0.5, 4, REACH_SEARCHED),  # 1 of 4: not trusted (K reached)
    (0.25, 0.25, 4, REACH_TRUSTED),  # need 1: the 4th draw is the first success
    (0.0, 0.5, 4, None),  # 0 of 4: dead, the search goes on past it
])
def test_step1_probe_stops_when_trust_is_settled(rate, threshold, draws, status):
    script = {"p": [0.0, rate, 1.0, 1.0, 1.0, 1.0]}
    params = S1.__class__(**{**S1.__dict__, "trust_pass_rate": threshold})
    (o,), _, be = _run_fractional([_sol(0, "p", 5, True)], script, params)
    step1 = sum(r.n for r in be.requests if r.prompt.split("Solution:\n", 1)[1].count("\n") == 1)
    assert step1 == draws
    if status is not None:
        assert o.extra["label_status"] == status
    if status == REACH_TRUSTED:
        assert o.rollouts == draws and o.labels == [True] * 5
    else:  # searched on from step 1: every later prefix reaches the answer, so no error
        assert o.extra["label_status"] == REACH_SEARCHED and o.first_error == -1 and o.rollouts > draws
    assert o.extra["design"] == "first-wave"  # step 1 stopped on its own outcomes: only its first wave is unbiased
    _check_invariants(o)


def test_step1_probe_settles_early_on_failures_once_alive():
    # K=8, trust from 0.5 (need 4): waves 2, 4, 2; step 1 at 1/6 succeeds once in its first 6 draws and fails 5:
    # more failures than K - need = 4, with a success: not trusted, alive, after 6 draws
    params = S1.__class__(**{**S1.__dict__, "k": 8})
    script = {"p": [0.0, 1 / 6, 1.0, 1.0, 1.0, 1.0]}
    (o,), _, be = _run_fractional([_sol(0, "p", 5, True)], script, params)
    step1 = sum(r.n for r in be.requests if r.prompt.split("Solution:\n", 1)[1].count("\n") == 1)
    assert step1 == 6 and o.extra["label_status"] == REACH_SEARCHED and o.labels[0] is True


def test_reach_probe_is_checked():
    from pipeline.config import ConfigError, LabelConfig

    with pytest.raises(ConfigError, match="reach_probe|reach-probe"):
        LabelConfig(reach_gate=True, reach_probe="elsewhere").validate()
