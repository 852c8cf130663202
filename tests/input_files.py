"""For the input tests: the field mappings of two public data set shapes, as a user passes them
(``--problem-field question --answer-field answer --answer-extract gsm8k --solution-field answer --splitter
newline`` for GSM8K), and the solutions of an input without their content keys."""

from __future__ import annotations

from collections.abc import Iterator

# GSM8K: {"question", "answer": "reasoning lines\n#### 42"}; the reasoning lines are the steps.
GSM8K = dict(problem_field="question", answer_field="answer", answer_extract="gsm8k", solution_field="answer",
             splitter="newline")
# Hendrycks MATH: {"problem", "solution" with a final \boxed{...}}. (MATH-500 also has "answer": the defaults plus
# solution_field="solution" fit it.)
MATH = dict(answer_field="solution", answer_extract="boxed", solution_field="solution")


def iter_solutions(spec, *args, **kwargs) -> Iterator:
    """The solutions of :func:`pipeline.input.iter_keyed_solutions` (the one pass a run makes) without their keys."""
    from pipeline.input import iter_keyed_solutions

    return (sol for _, sol in iter_keyed_solutions(spec, *args, **kwargs))
