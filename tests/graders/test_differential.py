"""Triaged disagreements between mcprm's grader and Math-Verify 0.8.0 (run both on case sets with
``python bench/bench_grader_agreement.py``), each with the right verdict and why; plus every case of the
committed case sets in ``bench/grader_cases/`` as a regression test.

The triage table holds cases where the two graders disagreed; the verdict here is the right one.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from graders import GraderConfig, grade, grade_batch

TRIAGED = [
    # (gold, response, right verdict, why)
    (r"\{4, 15, 25\}", r"the values that work are \boxed{4} , \boxed{15} , \boxed{25}.", True,
     "boxes side by side are one list answer"),
    ("x^2 + 6", r"So $\boxed{g(x) = x^2 + 6}$.", True, "a function definition answers with its body"),
    (r"3\sqrt{2}", "The distance is 3√3.", False, "unicode √ is read as a radical: 3√3 != 3√2"),
    (r"\frac{\sqrt{2}}{2}", "So the ratio equals √2/2.", True, "unicode √ in plain text"),
    ("-8", "The slope of the line is −8.", True, "U+2212 minus sign"),
    (r"\begin{pmatrix} -\frac{1}{3} & -7 \\ 2 & \frac{1}{3} \end{pmatrix}",
     r"\boxed{\begin{pmatrix} -1/3 & -7 \\ 2 & 1/3 \end{pmatrix}}", True, "matrix entries in another form"),
    ("4,114,218", r"the total is $\boxed{4,\,114,\,218}$.", True, "thin-space thousands separators"),
    ("(11, -3)", r"i.e. $\boxed{(m, n) = (11, -3)}$.", True, "a named pair answers with its value"),
    ("-4, 1", r"Therefore $\boxed{x = 1 \text{ or } x = -4}$", True, "roots joined by 'or' are a list"),
    (r"\frac{\pi}{3} + k\pi", "all solutions are x = π/3 + kπ, k ∈ ℤ.", True, "the 'k ∈ ℤ' qualifier is dropped"),
    (r"659,\!936", "we arrive at the result.\n\n\\[\n\\boxed{659,\\!936}.\n\\]", True, "MATH's thousands style"),
    ("101001_2", r"The base-2 representation is $\boxed{101001_{\text{two}}}$.", True, "base written as a word"),
    (r"75\%", "So the percentage increase is\n\\[75\\%\\]", True, "a display span at the end"),
    (r"4\sqrt{11}", r"\(4 \sqrt{11}\)", True, "a bare answer in \\( \\)"),
    ("y = 3x - 8", "**y=3x-8**", True, "markdown bold around a bare answer"),
    ("10, 11", "Final Answer: The final answer is $10,11$. I hope it is correct.", True,
     "two digits before the comma: a list, not a decimal comma"),
    (r"8 \pm \sqrt{5}", r"Answer: $8+\sqrt{5},8-\sqrt{5}$", True, "± is the set of both values"),
    (r"8\sqrt{6}", r"**Answer:** $\sqrt{384}$", True, "bold answer line"),
    ("484,906", "we move on to the total.\n\n#### 484{,}906", True, "GSM8K line with {,} separators"),
    (r"918\frac{1}{2}", "918.5", True, "a mixed number in LaTeX"),
    ("40/9", "The answer is 4 4/9.", True, "a mixed number in plain text"),
    ("2", "2 2/3", False, "a mixed number is not its integer part"),
    (r"$\frac{1}{2^{99}}$", r"$\frac{1}{2^{98}}$", False, "tiny values compared exactly, not with a tolerance"),
    (r"$1 - \frac{1}{\mathrm{e}}$", r"$1 + \frac{1}{\mathrm{e}}$", False, r"\mathrm{e} is Euler's number"),
    ("$4$", r"$4\sqrt(2)$", False, "a malformed radical is not 4"),
    ("3*x-1*y+13=0", "3x + 4y + 14=0", False, "two different lines"),
    ("$(0.6,2.6667]$", r"$(\frac{3}{5},\frac{8}{3}]$", True, "a rounded decimal inside an interval"),
    ("(2,4)", "(2,4)", True, "identical tuples"),
    (r"\{1, 22\}", "1, 22", True, "comma and space: a list"),
    ("1.22", "1,22", True, "one digit, comma, two digits: a decimal comma"),
    ("1000.99", "1000,99", True, "four digits before the comma: a decimal comma"),
    # from real model text (bench/grader_cases/real_model.jsonl)
    (r"\frac{7}{3}", r"\boxed{7:3}", True, "a ratio is its quotient"),
    (r"\text{No}", "No, $57$ is not a prime number.", True, "an unmarked yes/no answer to a yes/no question"),
    (r"\frac{7}{2}", "So we get \\( \\frac{7}{2} \\)\n\n#### X", True,
     "'#### X' copied from the instruction is a placeholder, not an answer"),
    ("10", r"The percentage is \boxed{10\%}", True, "percent against the number"),
]  # fmt: skip


@pytest.mark.parametrize("gold,response,expected,why", TRIAGED, ids=[t[3][:40] for t in TRIAGED])
def test_triaged_disagreement(gold, response, expected, why):
    assert grade(gold, response).correct is expected, why


CASES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "grader_cases")

# Known misses on real model text (bench/grader_cases/real_model.jsonl), left as they are, and why:
KNOWN_MISSES = {
    # unmarked answer followed by its justification: the last math span is the justification
    (r"\{-4, 4\}", r"This is because both \((-4)^2 = 16\) and \(4^2 = 16\)."),
    # cut off at max_new_tokens while testing intervals: the last interval mentioned is not an answer
    ("(-5, -1)", r"- For the interval \((-5, -1)\), choose a"),
}


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CASES_DIR, "*.jsonl"))), ids=os.path.basename)
def test_committed_case_set(path):
    """Every case's verdict is its hand verdict: a wrong answer is False, not None (no abstaining on a
    readable answer); a case's ``problem`` text is passed to the grader."""
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    assert len(rows) >= 200
    vs = grade_batch(
        [(r["gold"], r["response"]) for r in rows], GraderConfig(), problems=[r.get("problem") for r in rows]
    )
    wrong = [
        (r["source"], r["gold"], r["response"][-80:], v.reason)
        for r, v in zip(rows, vs, strict=True)
        if v.correct is not bool(r["expected"])
        and not any(r["gold"] == g and r["response"].endswith(tail) for g, tail in KNOWN_MISSES)
    ]
    assert not wrong, f"{len(wrong)} of {len(rows)} wrong, e.g. {wrong[:5]}"
