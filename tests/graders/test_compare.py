"""Golden pairs: every equal pair is checked in both argument orders; unequal pairs too."""

from __future__ import annotations

import pytest

from graders import CACHE, GraderConfig, grade, grade_batch

PM = r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"
BM = r"\begin{bmatrix}1&2\\3&4\end{bmatrix}"

EQUAL = {
    "numbers": [
        ("112", "112"),
        ("-5", "-5"),
        ("0.5", r"\frac12"),
        ("0.5", "1/2"),
        (r"\frac{1}{2}", "1/2"),
        (r"\frac{7}{3}", "7/3"),
        ("2.5", r"\frac{5}{2}"),
        ("-0.25", r"-\frac{1}{4}"),
        (r"\frac{-1}{4}", "-0.25"),
        ("3", "3.0"),
        ("3", "3.00"),
        ("0.1", ".1"),
        ("1.5e3", "1500"),
        ("+7", "7"),
        ("10", r"\frac{20}{2}"),
        ("007", "7"),
        (r"\frac{6}{4}", "1.5"),
        ("-7/3", r"\frac{-7}{3}"),
    ],
    "thousands": [
        ("1000", "1,000"),
        ("1234567", "1,234,567"),
        ("1234.5", "1,234.5"),
        ("1000", r"1{,}000"),
        ("1000", r"1\,000"),
        (r"\$1,000", "1000"),
    ],
    "tolerance": [
        (r"\frac13", "0.333"),
        (r"\frac{1}{3}", "0.3333333"),
        (r"\frac23", "0.667"),
        (r"\frac23", "0.6667"),
        (r"\pi", "3.14"),
        (r"\pi", "3.1416"),
        (r"\sqrt{2}", "1.414"),
        (r"\frac{200}{3}", "66.67"),
        ("e", "2.718"),
        (r"\frac{2}{3}", "0.666"),
    ],
    "symbolic": [
        (r"2\sqrt{2}", r"\sqrt{8}"),
        (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}"),
        (r"\frac{x^2-1}{x-1}", "x+1"),
        ("x^2+2x+1", "(x+1)^2"),
        (r"\sin^2x+\cos^2x", "1"),
        (r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt{2}}{2}"),
        (r"\log_2 8", "3"),
        ("2^{10}", "1024"),
        (r"\sqrt{2}+\sqrt{3}", r"\sqrt{5+2\sqrt{6}}"),
        ("2x+3y", "3y+2x"),
        (r"\binom{5}{2}", "10"),
        ("5!", "120"),
        (r"e^{i\pi}", "-1"),
        ("2+3i", "3i+2"),
        (r"\frac{1}{x}", "x^{-1}"),
        (r"\sqrt[3]{8}", "2"),
        (r"\infty", r"\infty"),
        ("a^2-b^2", "(a-b)(a+b)"),
        (r"\frac{2}{\sqrt{2}}", r"\sqrt{2}"),
    ],
    "sets_tuples_intervals": [
        (r"\{1,2\}", r"\{2,1\}"),
        (r"\{1,2,3\}", r"\{3,1,2\}"),
        ("(1,2)", "(1, 2)"),
        ("(1,2,3)", "(1,2,3)"),
        ("[1,2]", r"\left[1,2\right]"),
        ("(1,2]", "(1, 2]"),
        (r"(-\infty,3)", r"(-\infty, 3)"),
        (r"(-\infty,1)\cup(2,\infty)", r"(-\infty, 1) \cup (2, \infty)"),
        ("1,2", "2,1"),
        ("1,2,3", "3,2,1"),
        (r"\emptyset", r"\{\}"),
        (r"(\frac12, 3)", "(0.5, 3)"),
        (r"\{\frac12\}", r"\{0.5\}"),
    ],
    "matrices": [
        (PM, BM),
        (r"\begin{pmatrix}1\\2\end{pmatrix}", "(1,2)"),
        (r"\begin{pmatrix}\frac12&0\\0&1\end{pmatrix}", r"\begin{pmatrix}0.5&0\\0&1\end{pmatrix}"),
    ],
    "equations": [
        ("x=3", "3"),
        ("y=2x+1", "2x+1"),
        ("x=3", "x=3"),
        ("2x=6", "x=3"),
        ("y=2x+1", "2x-y+1=0"),
        ("x+y=3", "y+x=3"),
        (r"x=\frac12", "0.5"),
        ("3=x", "3"),
        ("g(x)=x+7", "x+7"),
        ("(a,b)=(5,2)", "(5,2)"),
        ("g(x)=2x", "g(t)=2t"),  # a function in another variable: decided by renaming
    ],
    "plus_minus": [(r"1\pm\sqrt{2}", r"1+\sqrt{2},1-\sqrt{2}"), (r"\pm 3", "3,-3"), (r"\pm3", r"\{-3,3\}")],
    "percent": [
        (r"50\%", "50"),
        (r"50\%", "0.5"),
        ("50%", r"\frac12"),
        (r"12.5\%", "0.125"),
        (r"100\%", "1"),
    ],
    "degrees": [
        (r"30^\circ", "30"),
        (r"30^{\circ}", "30"),
        ("45°", "45"),
        (r"90^\circ", r"90\text{ degrees}"),
    ],
    "units_text_dollars": [
        (r"5\text{ cm}", "5"),
        (r"5\text{ cm}^2", "5"),
        (r"\$5", "5"),
        (r"\$5.00", "5"),
        (r"12 \text{ apples}", "12"),
        ("5 cm", "5"),
        (r"\$1,234", "1234"),
        (r"\text{Monday}", "Monday"),
        (r"\text{(B)}", "B"),
        ("(C)", "C"),
        ("yes", "Yes"),
        (r"\textbf{12}", "12"),
        (r"\mathrm{east}", "east"),
        ("$12$", "12"),
        (r"\(7\)", "7"),
    ],
    "dfrac_tfrac": [
        (r"\dfrac{3}{4}", r"\frac34"),
        (r"\tfrac{3}{4}", "0.75"),
        (r"\dfrac{\sqrt{3}}{2}", r"\frac{\sqrt3}{2}"),
    ],
    "latex_vs_plain": [
        (r"\frac{\pi}{2}", "pi/2"),
        (r"\sqrt{2}", "sqrt(2)"),
        (r"2\sqrt{3}", "2*sqrt(3)"),
        ("x^2", "x**2"),
        (r"\pi", "pi"),
        (r"\frac{\sqrt{2}}{2}", "sqrt(2)/2"),
        (r"\infty", "inf"),
        ("e^{x}", "exp(x)"),
        (r"\left|x\right|", "abs(x)"),
        (r"x^{-1}", "x^-1"),
    ],
    "inequalities": [
        ("(1,2]", r"1<x\le 2"),
        ("x>3", r"(3,\infty)"),
        (r"x \ge 3", r"[3, \infty)"),
        (r"x \in (1,2]", "(1,2]"),
        (r"x<1 \text{ or } x>2", r"(-\infty,1)\cup(2,\infty)"),
    ],
}

UNEQUAL = [
    ("112", "113"),
    ("0.5", "0.51"),
    (r"\frac13", "0.33"),
    (r"\frac13", "0.334"),
    ("12345.6", "12345.7"),
    ("100000", "100001"),
    (r"\pi", "3.15"),
    (r"2\sqrt{2}", r"\sqrt{6}"),
    ("x^2", "x^3"),
    ("(1,2)", "(2,1)"),
    ("(1,2]", "(1,2)"),
    ("[1,2]", "(1,2)"),
    ("[1,2)", "(1,2]"),
    (r"\{1,2\}", r"\{1,3\}"),
    (r"\{1,2\}", r"\{1,2,3\}"),
    ("1,2", "1,3"),
    ("x=3", "4"),
    (r"1\pm\sqrt2", r"1+\sqrt2"),
    (r"50\%", "5"),
    ("Monday", "Tuesday"),
    ("A", "B"),
    ("1", r"\text{yes}"),
    (PM, r"\begin{pmatrix}1&2\\4&3\end{pmatrix}"),
    (PM, r"\begin{pmatrix}1&2&3&4\end{pmatrix}"),
    ("-5", "5"),
    ("0", "1"),
    ("x+1", "x-1"),
    (r"\sin x", r"\cos x"),
    ("2x", "2y"),
    (r"(-\infty, 3)", r"(-\infty, 3]"),
    ("1000", "1,001"),
    (r"\frac{7}{3}", "2.34"),
    (r"\frac{7}{3}", "2.3"),
    ("3", "x=4"),
    (r"30^\circ", "31"),
    ("2+3i", "2-3i"),
    ("(1,2,3)", "(1,3,2)"),
    (r"\sqrt{2}", "1.42"),
]


def _cases():
    for cat, pairs in EQUAL.items():
        for a, b in pairs:
            yield pytest.param(a, b, True, id=f"{cat}:{a}|{b}")
            if a != b:
                yield pytest.param(b, a, True, id=f"{cat}:{b}|{a}")
    for a, b in UNEQUAL:
        yield pytest.param(a, b, False, id=f"unequal:{a}|{b}")
        yield pytest.param(b, a, False, id=f"unequal:{b}|{a}")


CASES = list(_cases())


@pytest.fixture(scope="module")
def verdicts():
    """Grade every golden pair in one parallel batch (responses are full sentences with a box)."""
    pairs = [
        (p.values[0], f"We compute carefully.\nThe answer is $\\boxed{{{p.values[1]}}}$.") for p in CASES
    ]
    return dict(zip([tuple(p.values[:2]) for p in CASES], grade_batch(pairs), strict=True))


def test_enough_golden_pairs():
    assert sum(len(v) for v in EQUAL.values()) + len(UNEQUAL) >= 150


@pytest.mark.parametrize("gold,answer,expected", CASES)
def test_golden(verdicts, gold, answer, expected):
    v = verdicts[(gold, answer)]
    assert v.correct is expected, f"{gold!r} vs {answer!r}: {v}"
    assert v.extracted == answer
    assert v.reason


def test_single_matches_batch():
    assert grade("0.5", r"\boxed{\frac{1}{2}}").correct is True
    assert grade(r"2\sqrt{2}", r"\boxed{\sqrt{8}}").correct is True
    assert grade(r"2\sqrt{2}", r"\boxed{\sqrt{7}}").correct is False


@pytest.mark.parametrize(
    "gold,answer,config,expected",
    [
        (r"50\%", "0.5", GraderConfig(percent="number"), False),
        (r"50\%", "50", GraderConfig(percent="number"), True),
        (r"50\%", "50", GraderConfig(percent="fraction"), False),
        (r"50\%", "0.5", GraderConfig(percent="fraction"), True),
        ("(1,2,3)", "(3,2,1)", GraderConfig(ordered_tuples=False), True),
        ("(1,2,3)", "(3,2,1)", GraderConfig(), False),
        ("1,2", "2,1", GraderConfig(comma_list="ordered"), False),
        ("(1,2]", r"1<x\le 2", GraderConfig(interval_vs_inequality=False), False),
        ("x=3", "3", GraderConfig(equation_lhs_symbol=False), False),
        (r"\frac{x^2-1}{x-1}", "x+1", GraderConfig(symbolic="expand"), False),
        ("(x+1)^2", "x^2+2x+1", GraderConfig(symbolic="expand"), True),
        (r"\frac13", "0.333", GraderConfig(approx_min_sig_digits=0), False),
        (r"\frac13", "0.3333", GraderConfig(approx_min_sig_digits=5), False),
    ],
)
def test_policies(gold, answer, config, expected):
    assert grade(gold, rf"\boxed{{{answer}}}", config).correct is expected


def test_config_validation():
    with pytest.raises(ValueError, match="percent"):
        GraderConfig(percent="maybe")
    with pytest.raises(ValueError, match="timeout_s"):
        GraderConfig(timeout_s=0)


@pytest.mark.parametrize(
    "gold,answer,expected",
    [
        # An answer "lhs = value" is compared by its value when the gold is a bare value...
        ("3", "x+y=3", True),
        ("11", "2+9=11", True),
        ("x+7", "g(x)=x+7", True),
        # ...but a gold equation is the answer itself unless its left side is a variable.
        ("x+y=3", "3", False),
        ("a+3z=0", "0", False),
        ("7=11a+c", "11a+c", False),
        ("x=11", "11", True),
        ("x=11", "x=5+5+1=11", True),  # a chain: its last value
        ("x=11", "x=5+5+1=12", False),
    ],
)
def test_equations_are_compared_by_value_asymmetrically(gold, answer, expected):
    assert grade(gold, f"\\boxed{{{answer}}}").correct is expected


def test_unmarked_fallback_takes_the_last_math_expression():
    v = grade("42", "so we get 42 apples in total")
    assert (v.correct, v.extracted) == (True, "42")
    assert grade("x+1", "so we get 42 apples").correct is False  # 42 is the answer, and it is wrong
    v = grade("42", "we get 42", GraderConfig(last_number_fallback=False))
    assert (v.correct, v.reason, v.no_answer) == (False, "no answer found", True)


def test_cache_hit_and_reason():
    CACHE.clear()
    a = grade(r"\sqrt{8}", r"\boxed{2\sqrt{2}}")
    hits = CACHE.hits
    b = grade(r"\sqrt{8}", r"The answer is $2\sqrt{2}$.")
    assert CACHE.hits == hits + 1 and a.correct is b.correct is True
    assert b.extracted == r"2\sqrt{2}"


def test_gold_given_as_solution_or_int():
    assert grade("The total is \\boxed{12}.", "\\boxed{12}").correct is True
    assert grade("#### 1,234", "The answer is 1234").correct is True
    assert grade_batch([(12, "#### 12")])[0].correct is True


def test_bad_pairs_raise_with_index():
    with pytest.raises(TypeError, match="pair 1: response must be a string"):
        grade_batch([("1", "1"), ("1", None)])
    with pytest.raises(TypeError, match="pair 0: gold must be a string"):
        grade_batch([(None, "1")])
