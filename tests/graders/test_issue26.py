"""Issue 26: verdict kinds, no abstaining on a readable wrong answer, the problem text and the policies it
decides, the grader identity, the lenient second reading."""

from __future__ import annotations

import pytest

import graders
from graders import GraderConfig, Verdict, grade, grade_batch, grader_identity
from graders.normalize import normalize, repair
from graders.screen import lenient
from graders.verdict import CRASH, GOLD, KINDS, NO_ANSWER_KIND, REJECTED, TIMEOUT, UNREADABLE, VERDICT


@pytest.mark.parametrize(
    "gold,response,correct,kind",
    [
        ("12", r"The answer is \boxed{12}.", True, VERDICT),
        ("12", r"The answer is \boxed{\foo{13}}.", False, VERDICT),  # read leniently, wrong
        ("12", r"The answer is \boxed{\foo{12}}.", True, VERDICT),
        ("4", "The answer is somewhere between 3 and 5 apples.", False, VERDICT),
        ("12", "I could not finish the computation in time.", False, NO_ANSWER_KIND),
        ("12", r"The answer is $$", False, NO_ANSWER_KIND),
        ("(2, 4)", "   - For the interval \\((4, \\infty)\\), choose \\(x = 5\\):\n  (5 - 4)(5 -", False, NO_ANSWER_KIND),
        ("12", r"The answer is \boxed{9^{9^{9^{9}}}}", None, REJECTED),
        (r"\frac{1}{", r"The answer is \boxed{12}", None, GOLD),
    ],
)
def test_verdict_and_its_kind(gold, response, correct, kind):
    v = grade(gold, response)
    assert (v.correct, v.kind) == (correct, kind), v
    assert v.why == kind  # stated by the grader, not guessed from the reason


def test_no_verdict_kinds_are_the_lead_constants():
    assert set(KINDS) == {VERDICT, NO_ANSWER_KIND, UNREADABLE, REJECTED, GOLD, TIMEOUT, CRASH}
    assert Verdict(None, "timeout", "x").kind == TIMEOUT  # derived when a grader does not state it
    assert Verdict(True, "r", "x", why=VERDICT) == Verdict(True, "r", "x")  # the kind is not part of equality


def test_timeout_and_crash_kinds_from_the_pool():
    cfg = GraderConfig(timeout_s=0.2)
    v = grade("2", r"\boxed{\sum_{k=0}^{n} \binom{n}{k} - 2^n + 2}", cfg)
    assert v.correct is None and v.kind == TIMEOUT and v.why == TIMEOUT


@pytest.mark.parametrize(
    "raw,expected",
    [
        (r"\42", "42"), (r"3^{\text{rd}}", "3"), (r"21^{st}", "21"), (r"\\frac{1}{2}", r"\frac{1}{2}"),
        (r"\boxed{12", "12"), ("7}", "7"), (r"\color{red}{16}", "16"), (r"\nicefrac{1}{4}", r"\frac{1}{4}"),
        ("= 16", "16"), (r"0.\overline{3}", "1/3"), (r"1.\overline{36}", "15/11"), (r"\mathbf16", "16"),
        (r"\begin{pmatrix} 1 \\\\ 2 \end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
    ],
)  # fmt: skip
def test_repairs(raw, expected):
    assert repair(raw) == expected
    assert normalize(normalize(raw)) == normalize(raw)


def test_lenient_reading_keeps_one_piece_of_math_only():
    assert lenient(r"\foo{12}") == "{12}"
    assert lenient("Tom has 13 apples") == "13"
    assert lenient("x = 5 when y is 2") is None  # two pieces of math: no guess
    assert lenient("apples") is None


def test_problem_text_decides_tuple_vs_set():
    pair = ("(3, 5)", r"So the answer is $\boxed{\{3, 5\}}$.")
    assert grade(*pair).correct is True
    assert grade(*pair, problem="Find the ordered pair $(a, b)$ with $a < b$.").correct is False
    assert grade(*pair, problem="In order to solve it, find both roots.").correct is True  # "in order to"
    triples = [(*pair, "Find all roots."), (*pair, "Enter your answer as an ordered pair.")]
    assert [v.correct for v in grade_batch(triples)] == [True, False]
    assert [v.correct for v in grade_batch([pair, pair], problems=[None, "Answer in increasing order."])] == [
        True, False,
    ]  # fmt: skip
    assert grade(*pair, config=GraderConfig(tuple_vs_set="differ")).correct is False
    with pytest.raises(ValueError, match="one per pair"):
        grade_batch([pair], problems=["a", "b"])


def test_any_order_makes_tuples_unordered():
    pair = ("(3, 5)", r"$\boxed{(5, 3)}$")
    assert grade(*pair).correct is False
    assert grade(*pair, problem="Give both roots, in any order.").correct is True


def test_renamed_function_variable_policy():
    pair = ("f(x) = 2x", r"The function is $\boxed{f(t) = 2t}$.")
    assert grade(*pair).correct is True
    assert grade(*pair, config=GraderConfig(rename_function_variable=False)).correct is False


def test_grader_identity_holds_the_policies():
    base = grader_identity("sympy")
    assert base == graders.get_grader("sympy").version
    assert grader_identity("sympy", GraderConfig(timeout_s=5, workers=3)) == base  # resources are no policy
    changed = grader_identity("sympy", GraderConfig(tuple_vs_set="differ", interval_vs_inequality=False))
    assert changed == base + "+tuple_vs_set=differ,interval_vs_inequality=False"
    with pytest.raises(ValueError, match="tuple_vs_set"):
        GraderConfig(tuple_vs_set="sometimes")


def test_graders_without_problems_get_plain_pairs():
    seen = []

    def two_args(gold, response, config):
        seen.append((gold, response))
        return Verdict(gold == response, "same", response)

    graders.register_grader("two-args-test", two_args, overwrite=True)
    out = grade_batch([("1", "1", "a problem"), ("1", "2")], grader="two-args-test", problems=None)
    assert [v.correct for v in out] == [True, False] and seen == [("1", "1"), ("1", "2")]


def test_a_grader_gets_problems_only_when_registered_as_reading_them():
    """The registry's declaration (``reads_problems=True``), not an attribute probed on the grader, decides
    whether its grade_batch gets (gold, response, problem) triples."""
    from graders.registry import _READS_PROBLEMS, _REGISTRY, reads_problems

    class Recorder:
        name, version = "recorder-test", "recorder-test-1"

        def __init__(self):
            self.seen = []

        def grade_batch(self, items, config):
            self.seen.append(list(items))
            return [Verdict(True, "ok", item[1]) for item in items]

    g = Recorder()
    try:
        graders.register_grader("recorder-test", g, overwrite=True, reads_problems=True)
        assert reads_problems("recorder-test") and reads_problems("sympy") and not reads_problems("exact")
        grade_batch([("1", "1"), ("2", "2")], grader="recorder-test", problems=["P1", None])
        assert g.seen[-1] == [("1", "1", "P1"), ("2", "2", None)]
        graders.register_grader("recorder-test", g, overwrite=True)  # re-registered without the declaration
        assert not reads_problems("recorder-test")
        grade_batch([("1", "1")], grader="recorder-test", problems=["P1"])
        assert g.seen[-1] == [("1", "1")]
        with pytest.raises(TypeError, match="function grader"):
            graders.register_grader("fn-test", lambda gold, response, config: None, reads_problems=True)
        assert "fn-test" not in _REGISTRY
    finally:
        _REGISTRY.pop("recorder-test", None)
        _READS_PROBLEMS.discard("recorder-test")


def test_readable_answers_against_other_golds_get_a_verdict():
    """No abstaining: every committed case's response graded against a random other gold (almost always a
    wrong answer) is True or False -- None only for what is truly unreadable, here nothing."""
    import glob
    import json
    import os
    import random

    rows = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "grader_cases", "*.jsonl"))):
        rows += [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    rng = random.Random(26)
    golds = sorted({r["gold"] for r in rows})
    pairs = [(rng.choice(golds), rng.choice(rows)["response"]) for _ in range(1500)]
    vs = grade_batch(pairs, GraderConfig(timeout_s=2.0))
    undecided = [(g, v.extracted, v.reason) for (g, _), v in zip(pairs, vs, strict=True) if v.kind == UNREADABLE]
    assert not undecided, undecided[:5]
    assert sum(v.kind == VERDICT for v in vs) > 1400
