"""The synthetic task: exact checker on hand-made solutions, generator determinism and answer formats."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pipeline.bundled.generator import Difficulty, generate_problems
from pipeline.bundled.synthetic import (
    PROMPT_TEMPLATE,
    check_steps,
    format_answer,
    parse_latex_value,
    parse_problem,
    prefix_prompt,
)

PROBLEM = "Compute (23 + 17) * 3 - 48 / 6."
GOOD = ["23 + 17 = 40", "40 * 3 = 120", "48 / 6 = 8", "120 - 8 = 112", "The answer is \\boxed{112}."]


def test_reference_solution_is_correct():
    r = check_steps(PROBLEM, GOOD)
    assert r.first_error == -1 and r.step_correct == [True] * 5 and r.complete


def test_other_valid_orders_and_commutative_swaps():
    # 48 / 6 is independent of the left part: doing it first is allowed; + and * may swap operands.
    steps = ["48 / 6 = 8", "17 + 23 = 40", "3 * 40 = 120", "120 - 8 = 112", "The answer is \\boxed{112}."]
    assert check_steps(PROBLEM, steps).complete


def test_prefix_without_answer_line_is_correct_but_incomplete():
    r = check_steps(PROBLEM, GOOD[:2])
    assert r.first_error == -1 and r.step_correct == [True, True] and not r.complete
    assert check_steps(PROBLEM, []).first_error == -1


@pytest.mark.parametrize(
    ("steps", "first_error", "why"),
    [
        # wrong arithmetic
        (
            ["23 + 17 = 41", "41 * 3 = 123", "48 / 6 = 8", "123 - 8 = 115", "The answer is \\boxed{115}."],
            0,
            "arithmetic",
        ),
        (
            ["23 + 17 = 40", "40 * 3 = 120", "48 / 6 = 9", "120 - 9 = 111", "The answer is \\boxed{111}."],
            2,
            "arithmetic",
        ),
        # wrong operand (a number that is in the problem, at the wrong place)
        (["23 + 17 = 40", "40 * 6 = 240"], 1, "can be done next"),
        # wrong order of operations: precedence (17 * 3 ignores the parentheses) and - before /
        (["17 * 3 = 51"], 0, "can be done next"),
        (
            ["23 + 17 = 40", "40 * 3 = 120", "120 - 48 = 72", "72 / 6 = 12", "The answer is \\boxed{12}."],
            2,
            "can be done next",
        ),
        # invented number
        (["23 + 17 = 40", "40 * 5 = 200"], 1, "can be done next"),
        # reusing a consumed number / result used twice
        (["23 + 17 = 40", "23 + 17 = 40"], 1, "can be done next"),
        # non-commutative swap
        (["23 + 17 = 40", "40 * 3 = 120", "6 / 48 = 1/8"], 2, "can be done next"),
        # wrong final answer line
        (GOOD[:4] + ["The answer is \\boxed{113}."], 4, "boxed"),
        # missing steps before the answer line (right value, but operations were skipped)
        (["23 + 17 = 40", "40 * 3 = 120", "The answer is \\boxed{112}."], 2, "before all operations"),
        # garbage and a step after the answer line
        (["23 + 17 = 40", "so we get forty"], 1, "not a step"),
        (GOOD + ["112 + 0 = 112"], 5, "after the answer line"),
    ],
)
def test_corrupted_solutions(steps, first_error, why):
    r = check_steps(PROBLEM, steps)
    assert r.first_error == first_error, r
    assert why in r.reason
    assert r.step_correct == [True] * first_error + [False] * (len(steps) - first_error)
    assert not r.complete


def test_left_associativity_and_fractions_and_negatives():
    problem = "Compute 2 - 9 - 4 / 6."
    good = ["2 - 9 = -7", "4 / 6 = 2/3", "-7 - 2/3 = -23/3", "The answer is \\boxed{-\\frac{23}{3}}."]
    assert check_steps(problem, good).complete
    # Unreduced fractions are equal values.
    assert check_steps(problem, ["2 - 9 = -7", "4 / 6 = 4/6", "-7 - 4/6 = -46/6"]).first_error == -1
    # 9 - 4/6 is not a sub-expression of (2 - 9) - 4/6.
    assert check_steps(problem, ["4 / 6 = 2/3", "9 - 2/3 = 25/3"]).first_error == 1
    assert check_steps(problem, good[:3] + ["The answer is \\boxed{\\frac{23}{3}}."]).first_error == 3
    assert check_steps(problem, good[:3] + ["The answer is \\boxed{-23/3}."]).complete


def test_repeated_subexpression_tracks_every_choice():
    # (2 + 3) * 4 - (2 + 3): which "2 + 3" the first step reduced decides what is ready next.
    problem = "Compute (2 + 3) * 4 - (2 + 3)."
    assert check_steps(problem, ["2 + 3 = 5", "5 * 4 = 20", "2 + 3 = 5", "20 - 5 = 15"]).first_error == -1
    assert check_steps(problem, ["2 + 3 = 5", "2 + 3 = 5", "5 * 4 = 20", "20 - 5 = 15"]).first_error == -1
    assert check_steps(problem, ["2 + 3 = 5", "5 - 5 = 0"]).first_error == 1


def test_division_by_zero_step_is_wrong():
    r = check_steps("Compute 5 / (3 - 3).", ["3 - 3 = 0", "5 / 0 = 0"])
    assert r.first_error == 1


def test_not_a_synthetic_problem_is_a_clear_error():
    with pytest.raises(ValueError, match="not a synthetic arithmetic problem"):
        check_steps("What is the capital of France?", ["Paris"])
    with pytest.raises(ValueError, match="unexpected character"):
        parse_problem("Compute 2 ^ 3.")


def test_format_answer_and_parse():
    assert format_answer(Fraction(7, 3)) == "\\frac{7}{3}"
    assert format_answer(Fraction(-7, 3)) == "-\\frac{7}{3}"
    assert format_answer(Fraction(-5)) == "-5"
    for v in (Fraction(7, 3), Fraction(-7, 3), Fraction(-5), Fraction(0)):
        assert parse_latex_value(format_answer(v)) == v
    assert parse_latex_value("\\dfrac{1}{0}") is None
    assert parse_latex_value("x + 1") is None


def test_generator_is_deterministic_and_varied():
    a = generate_problems(200, seed=3)
    assert a == generate_problems(200, seed=3)
    assert a != generate_problems(200, seed=4)
    assert [r["id"] for r in a[:2]] == ["synth-3-00000", "synth-3-00001"]
    assert {r["n_steps"] for r in a} == set(range(2, 9))
    answers = [r["answer"] for r in a]
    assert any("\\frac" in x for x in answers) and any(x.startswith("-") for x in answers)
    assert any(x.startswith("-\\frac") for x in answers) or any("\\frac" in x for x in answers)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard", Difficulty(max_operand=5)])
def test_reference_solutions_pass_the_checker(difficulty):
    for r in generate_problems(150, seed=11, difficulty=difficulty, min_steps=1, max_steps=8):
        assert len(r["steps"]) == r["n_steps"] + 1
        res = check_steps(r["problem"], r["steps"])
        assert res.complete, (r, res)
        assert r["steps"][-1] == f"The answer is \\boxed{{{r['answer']}}}."


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown difficulty"):
        generate_problems(1, seed=0, difficulty="extreme")
    with pytest.raises(ValueError, match="min_steps"):
        generate_problems(1, seed=0, min_steps=5, max_steps=2)


def test_prompt_format():
    assert prefix_prompt(PROBLEM, GOOD, -1) == PROMPT_TEMPLATE.format(problem=PROBLEM)
    assert prefix_prompt(PROBLEM, GOOD, 1) == f"Problem: {PROBLEM}\nSolution:\n23 + 17 = 40\n40 * 3 = 120\n"
