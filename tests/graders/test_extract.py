from __future__ import annotations

import pytest

from graders import extract_answer, normalize
from graders.extract import prepare_gold


@pytest.mark.parametrize(
    "response,expected",
    [
        (r"so the answer is \boxed{0.5}", "0.5"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"first \boxed{2}, then corrected: \boxed{3}.", "3"),
        (r"\fbox{7}", "7"),
        (r"The answer is \boxed 5.", "5"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        # cut off inside the last box: no answer (never the earlier box); a box left open after a whole answer
        (r"ok \boxed{3} and then truncated \boxed{\frac{1}{", None),
        (r"ok \boxed{3} and then, on reflection, \boxed{13", "13"),
        ("40 * 3 = 120\n120 - 8 = 112\nThe answer is \\boxed{112}.", "112"),
        ("The answer is 112.", "112"),
        ("The answer is $\\frac{1}{2}$.", r"\frac{1}{2}"),
        ("Final answer: 3.5", "3.5"),
        ("The final answer is 7. I hope it is correct.", "7"),
        ("Natalia sold 48 clips.\n#### 1,234", "1,234"),
        ("so the answer is 3.14.", "3.14"),
        ("Answer: (B)", "(B)"),
        ("The answer is: x = 3\nDone", "x = 3"),
        (r"The answer is \(\sqrt{2}\).", r"\sqrt{2}"),
    ],
)
def test_extract(response, expected):
    assert extract_answer(response) == expected


@pytest.mark.parametrize(
    "response,expected",
    [
        ("so 40 * 3 = 120 and 120 - 8 = 112", "120 - 8 = 112"),  # graded by its value, 112
        ("it costs -3.5 dollars", "-3.5"),
        ("a total of 1,234 apples and", "1,234"),
        ("about 7/3 of it", "7/3"),
    ],
)
def test_unmarked_fallback(response, expected):
    assert extract_answer(response, fallback=False) is None
    assert extract_answer(response) == expected


@pytest.mark.parametrize(
    "response", ["", "no digits or answers here", r"\boxed{", "The answer is", "The answer is correct."]
)
def test_nothing_found(response):
    assert extract_answer(response) is None


def test_prepare_gold():
    assert prepare_gold(r"so \boxed{12}") == "12"
    assert prepare_gold("#### 72") == "72"
    assert prepare_gold("  \\frac{1}{2} ") == r"\frac{1}{2}"


@pytest.mark.parametrize(
    "raw,expected",
    [
        (r"\$1,000", "1000"),
        (r"\dfrac12", r"\frac{1}{2}"),
        (r"50\%", "50%"),
        (r"30^\circ", "30"),
        (r"5\text{ cm}", "5"),
        (r"\text{Monday}", "Monday"),
        (r"\left( 1, 2 \right)", "(1, 2)"),
        ("1, 234", "1, 234"),  # a list stays a list...
        ("1,234", "1234"),  # ...a thousands separator goes
        (r"x = 2 \text{ or } x = 3", "x=2, x=3"),
        ("2x", "2x"),
        ("12.", "12"),
        ("$\\boxed{5}$", "5"),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected
    assert normalize(normalize(raw)) == normalize(raw)
