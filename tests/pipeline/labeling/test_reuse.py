"""Rollout reuse: a continuation that writes the solution's next steps verbatim is also a draw of those prefixes.

Unit tests of the matching, of the strategies' bookkeeping and of the scheduler's accounting on a scripted engine
(the scheduling logic only; the real bundled model labels with reuse on in the integration tests).
"""

from __future__ import annotations

import pytest

from graders.verdict import Verdict
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings, remainders, step_deltas
from pipeline.labeling.strategies import ProbeResult, Reuse, StrategyParams, make_strategy
from pipeline.solution import Solution
from rollouts.base import BackendStats, Completion, SamplingConfig
from rollouts.prompts import make_prompt_format

STEPS = ("a = 3", "b = 4", "c = a + b = 7", "d = 2 * c = 14", "The answer is \\boxed{14}.")


def _prefixes(fmt, steps=STEPS):
    return [fmt.prefix("Compute d.", steps[: i + 1]) for i in range(len(steps) - 1)]


def reused_remainders(prefixes, step, text, limit):
    return remainders(step_deltas(prefixes), step, text, limit)


def _chars(text: str) -> tuple[int, ...]:
    """A character-level tokenizer: a prompt's ids are the earlier prompt's followed by the added text's."""
    return tuple(ord(ch) for ch in text)


@pytest.mark.parametrize("fmt", [make_prompt_format("plain", None), make_prompt_format("plain", None, separator=" ")])
def test_remainders_follow_the_verbatim_steps(fmt):
    sep = fmt.separator
    pre = _prefixes(fmt)
    limit = len(STEPS) - 1
    tail = "d = 2 * c = 14" + sep + "The answer is \\boxed{14}."
    # from prefix 0: writes steps 1 and 2 verbatim, then its own step 3
    text = "b = 4" + sep + "c = a + b = 7" + sep + "d = 14" + sep + "The answer is \\boxed{14}."
    got = reused_remainders(pre, 0, text, limit)
    assert [j for j, _ in got] == [1, 2]
    assert got[0][1] == "c = a + b = 7" + sep + "d = 14" + sep + "The answer is \\boxed{14}."
    assert got[1][1] == "d = 14" + sep + "The answer is \\boxed{14}."
    # a different first step: nothing to reuse
    assert reused_remainders(pre, 0, "b = 5" + sep + tail, limit) == []
    # a step written without its separator is not the same text (the next step may still be growing)
    assert reused_remainders(pre, 0, "b = 4", limit) == []
    assert reused_remainders(pre, 0, "b = 45" + sep, limit) == []
    # the last sampled prefix is limit - 1: a continuation never counts for the answer step
    text = "b = 4" + sep + "c = a + b = 7" + sep + tail
    assert [j for j, _ in reused_remainders(pre, 0, text, limit)] == [1, 2, 3]
    assert [j for j, _ in reused_remainders(pre, 2, tail, limit)] == [3]
    assert reused_remainders(pre, 3, "The answer is \\boxed{14}.", limit) == []


def test_no_reuse_when_prefixes_do_not_nest():
    pre = ["Q\nA: a = 3\n", "Q\nB: a = 3\nb = 4\n", "Q\nC: a = 3\nb = 4\nc = 7\n"]
    assert reused_remainders(pre, 0, "b = 4\nc = 7\n", 3) == []


def _drive(name, script, n_steps, solution_correct=False, **kw):
    """Run a strategy; ``script(probe)`` returns its ProbeResult. Returns (outcome, probed steps)."""
    gen = make_strategy(name, n_steps, solution_correct, StrategyParams(**kw))
    probed = []
    try:
        probes = next(gen)
        while True:
            probed += [p.step for p in probes]
            probes = gen.send([script(p) for p in probes])
    except StopIteration as stop:
        return stop.value, probed


def test_credits_count_as_draws_of_the_later_prefix():
    # per-step: prefix 0's 4 continuations all write step 1 verbatim; 3 of them then succeed
    def script(p):
        reuse = (Reuse(1, 4, 3),) if p.step == 0 else ()
        return ProbeResult(p.step, p.n, 0 if p.step == 1 else p.n, 0, 10 * p.n, reused=reuse)

    oc, _ = _drive("per-step", script, 4, k=4)
    st = oc.stats[1]
    assert (st.total, st.correct, st.reused) == (8, 3, 4)
    assert oc.labels[1] is True  # alive: a reused draw succeeded, its own 4 did not
    assert oc.stats[0].reused == 0 and oc.stats[0].total == 4


def test_binary_search_moves_past_a_later_prefix_proven_alive():
    # 10 steps, answer wrong. Own draws: prefix i succeeds iff i < 6. The first probe's successes also wrote steps
    # up to 5 verbatim: the search must not probe 1..5 again.
    alive = [i < 6 for i in range(10)]

    def script(p):
        ok = p.n if alive[p.step] else 0
        reuse = tuple(Reuse(j, 1, 1) for j in range(p.step + 1, 6)) if ok else ()
        return ProbeResult(p.step, p.n, ok, 0, 10 * p.n, reused=reuse)

    oc, probed = _drive("binary-search", script, 10, k=4, early_stop=False, bisect_fraction=0.5)
    assert oc.first_error == 6
    assert probed[0] == 4 and not any(0 < s < 6 and s != 4 for s in probed)
    assert oc.labels[:6] == [True] * 6 and oc.labels[6] is False

    # without the credits the same search probes inside (4, 6)
    def plain(p):
        return ProbeResult(p.step, p.n, p.n if alive[p.step] else 0, 0, 10 * p.n)

    oc2, probed2 = _drive("binary-search", plain, 10, k=4, early_stop=False, bisect_fraction=0.5)
    assert oc2.first_error == 6 and 5 in probed2


def test_binary_search_reopens_when_a_dead_probe_is_contradicted():
    # prefix 4 fails all its own draws, but a continuation of prefix 1 went through steps 2..6 and succeeded:
    # prefix 6 (and so 4) is alive; the first error must come after 6.
    def script(p):
        if p.step == 1:
            return ProbeResult(1, p.n, p.n, 0, 10 * p.n, reused=tuple(Reuse(j, 1, 1) for j in range(2, 7)))
        ok = p.n if p.step < 7 and p.step != 4 else 0
        return ProbeResult(p.step, p.n, ok, 0, 10 * p.n)

    oc, probed = _drive("binary-search", script, 10, k=4, early_stop=False, bisect_fraction=0.5)
    assert probed[:2] == [4, 1]
    assert oc.first_error == 7
    assert oc.labels[:7] == [True] * 7


class StepWriter:
    """Fake engine: every continuation writes the solution's remaining steps verbatim, except that from prefix 0 it
    writes step 1, then a wrong step 2 and a wrong answer every other time."""

    name = "step-writer"

    def __init__(self, steps):
        self.steps = steps
        self.stats = BackendStats()

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            done = r.prompt.split("Solution:\n", 1)[1].count("\n")  # steps already in the prompt
            rest = "\n".join(self.steps[done:])
            comps = []
            for i in range(r.n):
                text = self.steps[1] + "\nc = 8\nThe answer is \\boxed{15}." if done == 1 and i % 2 else rest
                comps.append(Completion(text, 9, token_ids=_chars(text)))
            out.append(comps)
        return out

    def close(self):
        pass


def _grader(log):
    def grade(pairs):
        log.extend(pairs)
        return [Verdict("\\boxed{" + g + "}" in r, "numeric" if "\\boxed" in r else "no answer found",
                        "x" if "\\boxed" in r else None) for g, r in pairs]

    return grade


@pytest.mark.parametrize("reuse", [True, False])
def test_scheduler_credits_and_grades_remainders(reuse):
    sol = Solution(id="s", problem="Compute d.", answer="14", steps=STEPS)
    log = []
    fmt = make_prompt_format("plain", None)
    sched = Scheduler(StepWriter(STEPS), _grader(log), fmt,
                      SchedulerSettings("per-step", StrategyParams(k=4),
                                        sampling=SamplingConfig(max_new_tokens=32), reuse=reuse), encode=_chars)
    [ls] = sched.label([sol])
    own = [4, 4, 4, 4, 0]
    assert sched.stats.rollouts == 16 and ls.rollouts == 16 and ls.rollout_tokens == 16 * 9  # no extra tokens
    if not reuse:
        assert [s.total for s in ls.stats] == own and sched.stats.reused_rollouts == 0
        assert all(s.reused == 0 for s in ls.stats)
        return
    # prefix 0: 4 draws write step 1 (all 4 credited to prefix 1), 2 of them go on verbatim to steps 2 and 3;
    # prefix 1: its 4 draws write steps 2 and 3; prefix 2: its 4 draws write step 3
    assert [s.reused for s in ls.stats] == [0, 4, 2 + 4, 2 + 4 + 4, 0]
    assert [s.total for s in ls.stats] == [4, 8, 10, 14, 0]
    # the two detours (wrong step 2) were credited to prefix 1 as failures, from their remainder
    assert ls.stats[1].correct == 4 + 2 and ls.stats[0].correct == 2
    assert sched.stats.reused_rollouts == sum(s.reused for s in ls.stats)
    # a credited draw was graded on its remainder, not on the whole continuation
    assert ("14", "c = 8\nThe answer is \\boxed{15}.") in log
    assert ls.labels == [True, True, True, True, True] and ls.first_error == -1


def _bpe():
    """A small byte-level BPE tokenizer trained here (no hub): merges make a prompt's tokens depend on what
    surrounds a piece of text, the case where copied text and a later prompt can tokenize differently."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["Compute d.\nSolution:\n" + "\n".join(STEPS)] * 50 + ["a = 3 b = 4 c = 7 d = 14 boxed"] * 50
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


class TokenWriter(StepWriter):
    """StepWriter whose continuations carry the token ids an engine would return: ``canonical`` ids continue
    the prompt's tokenization exactly; otherwise the same text spelled in single-byte tokens."""

    def __init__(self, steps, tok, canonical, finish="stop"):
        super().__init__(steps)
        self.tok, self.canonical, self.finish = tok, canonical, finish

    def generate(self, requests, sampling):
        out = []
        for r, comps in zip(requests, super().generate(requests, sampling)):
            base = self.tok.encode(r.prompt).ids
            fixed = []
            for c in comps:
                if self.canonical:  # what the model would have produced to reach the later prompt verbatim
                    ids = self.tok.encode(r.prompt + c.text).ids[len(base):]
                else:
                    ids = [i for ch in c.text.encode() for i in self.tok.encode(bytes([ch]).decode("latin-1")).ids]
                fixed.append(Completion(c.text, c.num_tokens, finish_reason=self.finish, token_ids=tuple(ids)))
            out.append(fixed)
        return out


@pytest.mark.parametrize("canonical", [True, False])
def test_reuse_is_exact_on_a_bpe_tokenizer(canonical):
    """A continuation is credited to a later prefix only if its token ids are that prompt's: the same text in
    other tokens is a different input to the model, so it is not a draw of the later prefix."""
    tok = _bpe()
    fmt = make_prompt_format("plain", None)
    sol = Solution(id="s", problem="Compute d.", answer="14", steps=STEPS)
    prompts = [fmt.prefix(sol.problem, STEPS[: i + 1]) for i in range(len(STEPS) - 1)]
    ids = [tok.encode(p).ids for p in prompts]
    assert all(ids[i + 1][: len(ids[i])] == ids[i] for i in range(len(ids) - 1))  # these prompts' ids nest
    sched = Scheduler(TokenWriter(STEPS, tok, canonical), _grader([]), fmt,
                      SchedulerSettings("per-step", StrategyParams(k=4),
                                        sampling=SamplingConfig(max_new_tokens=32), reuse=True), encode=lambda p: tok.encode(p).ids)
    [ls] = sched.label([sol])
    reused = [s.reused for s in ls.stats]
    if canonical:
        assert reused == [0, 4, 6, 10, 0]
    else:  # the same text in other tokens is not the later prompt: nothing is credited
        assert reused == [0] * 5
    assert [s.own_total for s in ls.stats] == [4, 4, 4, 4, 0]
    if not canonical:  # the byte-spelled text really does differ from the prompts' tokens
        assert any(len(tok.encode(p).ids) < len(p.encode()) for p in prompts)


def test_a_reused_remainder_cut_at_the_token_limit_is_censored():
    """A continuation cut at max_new_tokens (finish_reason "length") is a failure of its own prefix but never
    credited to a later one: its remainder had fewer tokens than a fresh draw of that prefix would have."""
    fmt = make_prompt_format("plain", None)
    sol = Solution(id="s", problem="Compute d.", answer="14", steps=STEPS)

    class Cut(StepWriter):
        def generate(self, requests, sampling):
            return [[Completion(c.text, c.num_tokens, finish_reason="length", token_ids=c.token_ids) for c in comps]
                    for comps in super().generate(requests, sampling)]

    sched = Scheduler(Cut(STEPS), _grader([]), fmt,
                      SchedulerSettings("per-step", StrategyParams(k=4),
                                        sampling=SamplingConfig(max_new_tokens=32), reuse=True), encode=_chars)
    [ls] = sched.label([sol])
    assert [s.reused for s in ls.stats] == [0] * 5 and [s.total for s in ls.stats] == [4, 4, 4, 4, 0]


@pytest.mark.parametrize("speculate", [True, False])
def test_reuse_and_the_search_leave_the_last_step_of_a_right_answer_undrawn(speculate):
    # Not trusting a right final answer, the binary search once probed the answer step itself, where reuse
    # indexed past the prompts (an IndexError that stopped a whole --no-trust-correct run on real solutions).
    # That step's label is the answer's whatever its draws say, so it is no longer drawn, nor speculated on.
    sol = Solution(id="s", problem="Compute d.", answer="14", steps=STEPS)
    fmt = make_prompt_format("plain", None)
    sched = Scheduler(StepWriter(STEPS), _grader([]), fmt,
                      SchedulerSettings("binary-search", StrategyParams(k=4, trust_correct=False, speculate=speculate),
                                        sampling=SamplingConfig(max_new_tokens=32), reuse=True), encode=_chars)
    [ls] = sched.label([sol])
    assert ls.stats[-1].total == 0 and ls.stats[-1].reused == 0 and ls.first_error == -1
    assert ls.labels[-1] is True and ls.rollouts > 0
