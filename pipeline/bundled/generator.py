"""The generator of the bundled task's problems (:mod:`pipeline.bundled.synthetic` is the task: its format, its
parser and its exact checker): random expression trees of a :class:`Difficulty`, each with the reference solution
that reduces it one operation a step."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction

from pipeline.bundled.synthetic import (
    OPS,
    answer_line,
    format_answer,
    reference_steps,
    render_tree,
    tree_value,
)


@dataclass(frozen=True)
class Difficulty:
    """Knobs of the generator.

    ``max_operand``: problem numbers are drawn from 1..max_operand. ``op_weights``: relative frequency of
    ``+ - * /``. ``exact_division``: probability that a division is made exact (divisor of an integer
    dividend) instead of producing a fraction. ``max_abs``/``max_den``: every intermediate value must stay
    within these bounds (keeps the arithmetic learnable), problems that break them are redrawn.
    """

    max_operand: int = 10
    op_weights: tuple[float, float, float, float] = (1.0, 1.0, 0.7, 0.4)
    exact_division: float = 0.7
    max_abs: int = 120
    max_den: int = 10


DIFFICULTIES = {
    "easy": Difficulty(
        max_operand=9, op_weights=(1.0, 1.0, 0.6, 0.35), exact_division=0.7, max_abs=100, max_den=9
    ),
    "medium": Difficulty(),
    "hard": Difficulty(
        max_operand=30, op_weights=(1.0, 1.0, 1.0, 0.8), exact_division=0.5, max_abs=2000, max_den=30
    ),
}


@dataclass
class _Gen:
    rng: random.Random
    d: Difficulty
    stats: dict = field(default_factory=dict)

    def leaf(self) -> Fraction:
        return Fraction(self.rng.randint(1, self.d.max_operand))

    def tree(self, k: int):
        if k == 0:
            return self.leaf()
        kl = self.rng.randint(0, k - 1)
        op = self.rng.choices(OPS, weights=self.d.op_weights)[0]
        left = self.tree(kl)
        if op == "/" and k - 1 - kl == 0 and self.rng.random() < self.d.exact_division:
            try:
                lv = tree_value(left)
            except ZeroDivisionError:  # redrawn by ok()
                lv = Fraction(0)
            if lv.denominator == 1 and lv != 0:
                divisors = [q for q in range(2, self.d.max_operand + 1) if lv.numerator % q == 0]
                if divisors:
                    return (op, left, Fraction(self.rng.choice(divisors)))
        return (op, left, self.tree(k - 1 - kl))

    def ok(self, node) -> bool:
        if isinstance(node, Fraction):
            return True
        op, left, right = node
        if not (self.ok(left) and self.ok(right)):
            return False
        if op == "/" and tree_value(right) == 0:
            return False
        v = tree_value(node)
        return abs(v.numerator) <= self.d.max_abs * v.denominator and v.denominator <= self.d.max_den


def _resolve_difficulty(difficulty: str | Difficulty) -> Difficulty:
    if isinstance(difficulty, Difficulty):
        return difficulty
    try:
        return DIFFICULTIES[difficulty]
    except KeyError:
        raise ValueError(
            f"unknown difficulty {difficulty!r}; use one of {sorted(DIFFICULTIES)} or a Difficulty"
        ) from None


def make_problem(tree, id: str = "") -> dict:
    """The row of one problem given its expression tree (keys as in :func:`generate_problems`)."""
    steps: list[str] = []
    value = reference_steps(tree, steps)
    n_ops = len(steps)
    steps.append(answer_line(value))
    return {
        "id": id,
        "problem": f"Compute {render_tree(tree)}.",
        "answer": format_answer(value),
        "steps": steps,
        "n_steps": n_ops,
    }


def generate_problems(
    n: int,
    seed: int,
    difficulty: str | Difficulty = "medium",
    min_steps: int = 2,
    max_steps: int = 8,
) -> list[dict]:
    r"""``n`` problems, deterministic for ``(seed, difficulty, min_steps, max_steps)``.

    Each row: ``id`` (``synth-{seed}-{i}``), ``problem`` (``Compute ....``), ``answer`` (LaTeX), ``steps``
    (reference solution: one operation per step in post-order, then the answer line) and ``n_steps`` (the
    number of operations, uniform in ``min_steps..max_steps``; ``len(steps) == n_steps + 1``).
    """
    if not 1 <= min_steps <= max_steps:
        raise ValueError(
            f"need 1 <= min_steps <= max_steps, got min_steps={min_steps}, max_steps={max_steps}"
        )
    gen = _Gen(random.Random(seed), _resolve_difficulty(difficulty))
    rows = []
    for i in range(n):
        k = gen.rng.randint(min_steps, max_steps)
        for _ in range(10_000):
            tree = gen.tree(k)
            if gen.ok(tree):
                break
        else:  # pragma: no cover - the presets never get here
            raise RuntimeError(f"could not draw a problem with {k} operations within the difficulty's bounds")
        rows.append(make_problem(tree, id=f"synth-{seed}-{i:05d}"))
    return rows
