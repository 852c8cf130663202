"""Every example of issue 12 ("a grader that users trust more than math-verify"), with the right verdict.

Each case is (gold, response, expected verdict, expected extracted answer or None to skip that check).
"""

from __future__ import annotations

import pytest

from graders import grade, grade_batch

CASES = [
    # 1. bare answers: the whole expression, never a fragment
    (r"\frac{3}{7}", r"$\frac{3}{7}$", True, r"\frac{3}{7}"),
    ("(2, 5]", "$(2, 5]$", True, "(2, 5]"),
    (r"4\sqrt{3}", r"Putting it together, the height is \(4\sqrt{3}\).", True, r"4\sqrt{3}"),
    (r"\frac{11}{4}", r"We get x = \frac{11}{4}", True, r"x = \frac{11}{4}"),
    ("2", r"so x = \frac{3+\sqrt{7}}{2}", False, r"x = \frac{3+\sqrt{7}}{2}"),
    # 2. end-of-answer formats
    ("87", "Final Answer: The final answer is $87$. I hope it is correct.", True, "87"),
    ("240", "Answer: Maria needs 240 minutes", True, "240"),
    ("61", "**Answer:** 61", True, "61"),
    ("42", "She has 42 left.\n#### 42", True, "42"),
    ("5", "#### Case n=3:\nThen the count is 5.", True, "5"),
    # 3. several boxes; an explicit final-answer line wins over an intermediate box
    (r"\{1,4,9\}", r"\boxed{1}, \boxed{4}, \boxed{9}", True, "1, 4, 9"),
    ("7", r"We first find \boxed{12}. Final Answer: The final answer is 7.", True, "7"),
    (r"so the total is \boxed{1}, \boxed{4}, \boxed{9}", r"$\{9, 4, 1\}$", True, None),
    # 4. numbers and commas: one rule for gold and answer alike
    (r"12,\!345", r"\boxed{12345}", True, None),
    ("12345", r"\boxed{12,\!345}", True, None),
    ("4,316,588", r"\boxed{4, 316, 588}", True, None),
    ("4, 316, 588", r"\boxed{4,316,588}", True, None),
    ("1.22", r"\boxed{1,22}", True, None),  # a decimal comma
    (r"\{1, 22\}", r"\boxed{1, 22}", True, None),  # a list stays a list
    # 5. relations and functions
    ("x+7", r"\boxed{g(x)=x+7}", True, None),
    ("(5,2)", r"\boxed{(a,b)=(5,2)}", True, None),
    ("g(x)=2x", r"\boxed{g(t)=2t}", True, None),
    ("g(x)=2x", r"\boxed{g(t)=3t}", False, None),
    # other classes named in the issue
    (r"1\pm\sqrt{2}", "The roots are 1 ± √2", True, None),
    (r"\frac{\pi}{4}+k\pi", r"\boxed{x = \frac{\pi}{4} + k\pi, k \in \mathbb{Z}}", True, None),
    (r"\frac{\pi}{4}+k\pi", r"\boxed{\frac{\pi}{4}+k\pi \text{ for } k\in\mathbb{Z}}", True, None),
    (
        r"\begin{pmatrix}-\frac{1}{3}&1\\0&2\end{pmatrix}",
        r"\boxed{\begin{pmatrix}-1/3&1\\0&2\end{pmatrix}}",
        True,
        None,
    ),
    ("61", "**Answer: 61**", True, "61"),
    # a gold answer that is itself prose
    ("The function is increasing on $(0, \\infty)$.", r"\boxed{(0,\infty)}", True, None),
    ("Yes, it is possible to tile the board with these pieces.", r"\boxed{\text{Yes}}", True, None),
    ("No, such a number does not exist in general.", r"\boxed{\text{Yes}}", False, None),
    ("The minimum value is 12, attained when x = 3 and y = 4.", r"\boxed{12}", True, None),
    ("61", r"The answer is \boxed{61}\]", True, "61"),
]


@pytest.mark.parametrize("gold,response,expected,extracted", CASES, ids=[c[1][:40] for c in CASES])
def test_issue_example(gold, response, expected, extracted):
    v = grade(gold, response)
    assert v.correct is expected, v
    if extracted is not None:
        assert v.extracted == extracted


def test_no_answer_is_a_failed_continuation():
    [cut, ramble] = grade_batch([("42", r"so we need \boxed{"), ("42", "Let me think again about this.")])
    for v in (cut, ramble):
        assert v.correct is False and v.no_answer and v.reason == "no answer found"


@pytest.mark.parametrize(
    "response",
    [r"\boxed{3^{³}}", "\ud800", "x" * 65_536, "(" * 65_536, "1," * 32_768, "\\frac{" * 20_000, "####" * 16_000],
    ids=["superscript", "surrogate", "64k-letters", "64k-parens", "64k-commas", "frac-chain", "hashes"],
)
def test_hostile_inputs_give_a_reason_not_an_exception(response):
    v = grade("9", response)
    assert v.correct is not True and v.reason
