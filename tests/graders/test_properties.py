"""Property tests: any string gives a verdict with a reason, and nothing raises (hypothesis).

The strategies mix random Unicode (lone surrogates included) with fragments that real and hostile model
output contains: LaTeX commands, unbalanced braces, boxes, answer phrases, power towers, superscript digits.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graders import GraderConfig, extract_answer, grade_batch, normalize
from graders.compare import relation_values
from graders.extract import prepare_gold

FRAGMENTS = [
    "\\boxed{", "\\boxed", "}", "{", "\\frac", "\\sqrt", "[", "]", "(", ")", "^", "_", "$", "$$", "\\(", "\\)",
    "\\[", "\\]", "=", ",", ";", ":", "\\!", "\\,", "####", "\n", " ", "The answer is ", "Final Answer: ",
    "**Answer:** ", "\\text{", "\\left(", "\\right)", "\\begin{pmatrix}", "\\end{pmatrix}", "&", "\\\\", "³",
    "²", "±", "√", "π", "−", "∈ ℤ", "9^{9^{9}}", "10!", "x", "y", "1", "23", "0.5", "1,234", "4, 316, 588",
    "%", "\\%", "\\$", "\\pm", "\\infty", "\\cup", "\\le", "\\in", "\\mathbb{Z}", "i", "e", "\\pi", "and", "or",
    "__import__", "'", '"', "\ud800", "\x00", "…", "**", "`",
]  # fmt: skip

texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(string.printable, max_size=5)), max_size=30).map(
        "".join
    ),
)

CFG = GraderConfig(timeout_s=1.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gold=texts, response=texts)
def test_any_pair_gets_a_verdict_with_a_reason(gold, response):
    [v] = grade_batch([(gold, response)], CFG)
    assert v.correct in (True, False, None)
    assert isinstance(v.reason, str) and v.reason
    if v.no_answer:
        assert v.correct is False and v.extracted is None


@settings(max_examples=500, deadline=None)
@given(text=texts)
def test_extraction_and_normalization_never_raise(text):
    ans = extract_answer(text)
    assert ans is None or isinstance(ans, str)
    assert isinstance(prepare_gold(text), str)
    n = normalize(text)
    assert isinstance(n, str)
    assert isinstance(relation_values(n, normalize(ans or "")), tuple)


@settings(max_examples=200, deadline=None)
@given(a=texts, b=texts)
def test_a_batch_keeps_order_and_length(a, b):
    pairs = [("5", "\\boxed{5}"), (a, b), ("7", "The answer is 8.")]
    vs = grade_batch(pairs, CFG)
    assert len(vs) == 3
    assert vs[0].correct is True and vs[2].correct is False
