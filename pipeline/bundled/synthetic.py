r"""A synthetic multi-step arithmetic task with an exact step checker.

Problems are arithmetic expressions over positive integers with ``+ - * /``, parentheses and the usual
precedence, e.g. ``Compute (23 + 17) * 3 - 48 / 6.``. A solution does one operation per step and ends with
an answer line::

    23 + 17 = 40
    40 * 3 = 120
    48 / 6 = 8
    120 - 8 = 112
    The answer is \boxed{112}.

Prompt format (what the bundled model was trained on, and what the labeling pipeline continues):

- prompt = ``PROMPT_TEMPLATE.format(problem=...)`` = ``"Problem: {problem}\nSolution:\n"``;
- steps are joined by ``STEP_SEPARATOR`` (``"\n"``), one step per line;
- an operation step is ``"a op b = c"`` with single spaces around ``op`` and ``=``; values are integers
  (``120``, ``-5``) or fractions in lowest terms written ``7/3`` / ``-7/3``;
- the last step is exactly ``"The answer is \boxed{X}."`` with X in LaTeX (``112``, ``-5``,
  ``\frac{7}{3}``, ``-\frac{7}{3}``), followed by the model's EOS. The answer line is a step: a solution
  with 4 operations has 5 steps;
- the continuation prompt after step i is ``prompt + "\n".join(steps[:i + 1]) + "\n"``
  (:func:`prefix_prompt`).

Checker semantics (:func:`check_steps`, exact for this task). The problem text is parsed into an expression
tree (left-associative, ``* /`` before ``+ -``). A sub-expression is *ready* when both its operands are
numbers: problem numbers or results of earlier steps. An operation step ``a op b = c`` is correct iff

1. some ready sub-expression has operator ``op`` and operands ``(a, b)`` in this order (or ``(b, a)`` for the
   commutative ``+`` and ``*``), compared by exact value - so any order among independent ready
   sub-expressions is allowed, but skipping precedence, parentheses or left-to-right associativity
   (``2 + 3 + 4`` must start with ``2 + 3``), using a number that is not there, or reusing a consumed one is
   wrong; and
2. ``c == a op b`` exactly (fractions compared by value, so ``14/6`` is accepted for ``7/3``).

The step then replaces that sub-expression by its value. When several ready sub-expressions match (the
problem contains the same sub-expression twice) every choice is tracked, so the verdict never depends on
which one the solver meant. The answer line is correct iff every operation has been done and it boxes the
final value. Anything else (unparseable text, division by zero, a step after the answer line) is wrong.
Steps after the first wrong one are not judged: they are reported ``False`` (a prefix that contains an
error is wrong, the convention of Math-Shepherd hard labels). A prefix without the answer line can be fully
correct (``first_error == -1``) while ``complete`` is ``False``.

Pure Python (``fractions``, ``random``); deterministic for a given seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

PROMPT_TEMPLATE = "Problem: {problem}\nSolution:\n"
STEP_SEPARATOR = "\n"
ANSWER_TEMPLATE = "The answer is \\boxed{{{answer}}}."

OPS = ("+", "-", "*", "/")
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
_COMMUTATIVE = {"+", "*"}


# --------------------------------------------------------------------------------------------- numbers


def format_value(v: Fraction) -> str:
    """A value as written in a step: ``120``, ``-5``, ``7/3``, ``-7/3``."""
    v = Fraction(v)
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def format_answer(v: Fraction) -> str:
    r"""A value as LaTeX for the answer line: ``112``, ``-5``, ``\frac{7}{3}``, ``-\frac{7}{3}``."""
    v = Fraction(v)
    if v.denominator == 1:
        return str(v.numerator)
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


def answer_line(v: Fraction) -> str:
    r"""The final step: ``The answer is \boxed{X}.``"""
    return ANSWER_TEMPLATE.format(answer=format_answer(v))


_NUM = r"-?\d{1,12}(?:/\d{1,12})?"
_STEP_RE = re.compile(rf"^\s*({_NUM})\s+([-+*/])\s+({_NUM})\s*=\s*({_NUM})\s*$")
_ANSWER_RE = re.compile(r"^\s*The answer is \\boxed\{(.*)\}\.?\s*$")
_LATEX_NUM_RE = re.compile(
    r"^(-?)\s*(?:\\[dt]?frac\{(\d{1,12})\}\{(\d{1,12})\}|(\d{1,12})(?:\s*/\s*(\d{1,12}))?)$"
)


@lru_cache(maxsize=65_536)  # Fractions are immutable; step values repeat (cuts eval's checker time)
def _parse_value(s: str) -> Fraction | None:
    if "/" in s:
        num, den = s.split("/")
        return Fraction(int(num), int(den)) if int(den) != 0 else None
    return Fraction(int(s))


def parse_latex_value(s: str) -> Fraction | None:
    r"""Parse a boxed answer: ``-5``, ``7/3``, ``\frac{7}{3}``, ``-\frac{7}{3}`` (``\dfrac`` too); else None."""
    m = _LATEX_NUM_RE.match(s.strip())
    if not m:
        return None
    sign, fnum, fden, inum, iden = m.groups()
    num, den = (fnum, fden) if fnum is not None else (inum, iden or "1")
    if int(den) == 0:
        return None
    v = Fraction(int(num), int(den))
    return -v if sign else v


def _apply(op: str, a: Fraction, b: Fraction) -> Fraction | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return a / b if b != 0 else None


# ------------------------------------------------------------------------------------- expression trees
# A tree is either a Fraction (a number) or a tuple (op, left, right). Tuples are hashable, which lets the
# checker keep a set of possible states.


def _value(node) -> Fraction:
    if isinstance(node, Fraction):
        return node
    op, left, right = node
    v = _apply(op, _value(left), _value(right))
    if v is None:
        raise ZeroDivisionError("division by zero in the problem expression")
    return v


def _render(node) -> str:
    """Expression text with the minimal parentheses that parse back to the same tree."""
    if isinstance(node, Fraction):
        return format_value(node)
    op, left, right = node
    ls, rs = _render(left), _render(right)
    if isinstance(left, tuple) and _PREC[left[0]] < _PREC[op]:
        ls = f"({ls})"
    if isinstance(right, tuple) and _PREC[right[0]] <= _PREC[op]:
        rs = f"({rs})"
    return f"{ls} {op} {rs}"


_TOKEN_RE = re.compile(r"\s*(?:(\d+)|(.))")


_PROBLEM_RE = re.compile(r"^Compute\s+(.+?)\s*\.?$", re.S)
_PLAIN_RE = re.compile(r"[0-9+\-*/() ]*")  # ASCII digits, operators, parentheses and spaces only
_PLAIN_TOKEN_RE = re.compile(r"[0-9]+|[-+*/()]")
_LEAF: dict[str, Fraction] = {}


def _plain_expr(text: str):
    """The tree of a plain expression (see _PLAIN_RE) by the grammar of :func:`parse_problem`, or None for
    anything else, which the full parser then parses or explains. Same trees, several times faster."""
    if not _PLAIN_RE.fullmatch(text):
        return None
    toks = _PLAIN_TOKEN_RE.findall(text)  # the tokens parse_problem's tokenizer gives such a text
    toks.append("")  # end marker
    try:
        node, i = _plain_sum(toks, 0)
    except (ValueError, IndexError):
        return None
    return node if i == len(toks) - 1 else None


def _plain_level(toks: list[str], i: int, ops: str, operand):
    """``operand (op operand)*`` for the operators ``ops`` of one precedence level, left-associative."""
    node, i = operand(toks, i)
    while toks[i] in ops:
        op = toks[i]
        right, i = operand(toks, i + 1)
        node = (op, node, right)
    return node, i


def _plain_sum(toks: list[str], i: int):
    return _plain_level(toks, i, ("+", "-"), _plain_product)


def _plain_product(toks: list[str], i: int):
    return _plain_level(toks, i, ("*", "/"), _plain_factor)


def _plain_factor(toks: list[str], i: int):
    tok = toks[i]
    if tok == "(":
        node, i = _plain_sum(toks, i + 1)
        if toks[i] != ")":
            raise ValueError
        return node, i + 1
    neg = tok == "-"
    if neg:
        i += 1
        tok = toks[i]
    if not tok.isdigit():
        raise ValueError
    v = _LEAF.get(tok)
    if v is None:
        v = Fraction(int(tok))
        if len(_LEAF) < 4096:
            _LEAF[tok] = v
    return (-v if neg else v), i + 1


@lru_cache(maxsize=4096)  # trees are immutable; a corpus holds many solutions of one problem
def parse_problem(problem: str):
    """Parse ``Compute <expression>.`` into an expression tree; ValueError says what is wrong."""
    text = problem.strip()
    m = _PROBLEM_RE.match(text)
    if not m:
        raise ValueError(
            f"not a synthetic arithmetic problem (expected 'Compute <expression>.'): {problem[:80]!r}"
        )
    tree = _plain_expr(m.group(1))
    if tree is not None:
        return tree
    tokens: list[str] = []
    for num, other in _TOKEN_RE.findall(m.group(1)):
        if num:
            tokens.append(num)
        elif other.strip():
            if other not in "+-*/()":
                raise ValueError(f"unexpected character {other!r} in synthetic problem {problem[:80]!r}")
            tokens.append(other)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError(f"synthetic problem ends early: {problem[:80]!r}")
        pos += 1
        return tokens[pos - 1]

    def expr():
        node = term()
        while peek() in ("+", "-"):
            op = take()
            node = (op, node, term())
        return node

    def term():
        node = factor()
        while peek() in ("*", "/"):
            op = take()
            node = (op, node, factor())
        return node

    def factor():
        tok = take()
        if tok == "(":
            node = expr()
            if take() != ")":
                raise ValueError(f"unbalanced parentheses in synthetic problem {problem[:80]!r}")
            return node
        if tok == "-" and peek() is not None and peek().isdigit():
            return -Fraction(int(take()))
        if tok.isdigit():
            return Fraction(int(tok))
        raise ValueError(f"unexpected {tok!r} in synthetic problem {problem[:80]!r}")

    tree = expr()
    if pos != len(tokens):
        raise ValueError(f"trailing {tokens[pos]!r} in synthetic problem {problem[:80]!r}")
    return tree


def _ready_reductions(node, op: str, a, b, value: Fraction) -> list:
    """Every tree obtained by reducing one ready sub-expression ``a op b`` (or ``b op a`` if commutative) to
    ``value`` (= ``a op b``), those in the left subtree first."""
    # the checker's hot path: a node is a Fraction or a tuple, so ``type(...) is tuple`` is the test
    # isinstance(..., Fraction) makes without the ABC machinery of numbers.Rational; lists, not generators;
    # ``a``/``b`` may be ints (see _key), which Fraction.__eq__ compares without that machinery too
    if type(node) is not tuple:
        return []
    nop, left, right = node
    lt, rt = type(left) is tuple, type(right) is tuple
    if not lt and not rt:
        if nop == op and ((left, right) == (a, b) or (op in _COMMUTATIVE and (left, right) == (b, a))):
            return [value]
        return []
    out = [(nop, new_left, right) for new_left in _ready_reductions(left, op, a, b, value)] if lt else []
    if rt:
        out += [(nop, left, new_right) for new_right in _ready_reductions(right, op, a, b, value)]
    return out


def _key(v: Fraction):
    """``v`` as an int when it is whole (equal to ``v``, and compared with a Fraction faster), else ``v``."""
    return v.numerator if v.denominator == 1 else v


def _reference_steps(node, out: list[str]) -> Fraction:
    """Post-order (left subtree, right subtree, node) evaluation, one step per operation."""
    if isinstance(node, Fraction):
        return node
    op, left, right = node
    a = _reference_steps(left, out)
    b = _reference_steps(right, out)
    c = _apply(op, a, b)
    out.append(f"{format_value(a)} {op} {format_value(b)} = {format_value(c)}")
    return c


# ------------------------------------------------------------------------------------------------ checker


@dataclass(frozen=True)
class CheckResult:
    """Verdict of :func:`check_steps`.

    ``first_error``: index of the first wrong step, -1 if none. ``step_correct[i]``: step i is correct
    (False for every step from the first error on). ``complete``: no error and the last step is a correct
    answer line. ``reason``: why the first wrong step is wrong ("" if none), naming it as users count steps
    (``step 1`` is ``steps[0]``).
    """

    first_error: int
    step_correct: list[bool]
    complete: bool
    reason: str = ""


def check_steps(problem: str, steps: list[str] | tuple[str, ...]) -> CheckResult:
    """Judge every step of a solution (or of a prefix of one) to a synthetic problem exactly.

    Works from the problem text alone (see the module docstring for the rules). Raises ValueError if
    ``problem`` is not a synthetic problem.
    """
    states = [parse_problem(problem)]  # the possible trees so far, distinct
    correct: list[bool] = []
    reason = ""
    answered = False
    for i, step in enumerate(steps):
        reason, after = _judge(step, states, answered)
        if reason:
            correct.extend([False] * (len(steps) - i))
            return CheckResult(i, correct, False, f"step {i + 1}: {reason}")  # named from 1, as users count
        if after is None:  # the answer line
            answered = True
        else:
            states = after
        correct.append(True)
    return CheckResult(-1, correct, answered, "")


def _judge(step: str, states: list, answered: bool) -> tuple[str, list | None]:
    """("", the states after ``step``; None after the answer line) if ``step`` is correct in at least one of
    ``states``, else (a short reason, None). The reductions that make the step possible are the next states,
    so they are computed once."""
    if answered:
        return "step after the answer line", None
    m = _ANSWER_RE.match(step)
    if m:
        done = [s for s in states if isinstance(s, Fraction)]
        if not done:
            return "answer line before all operations are done", None
        boxed = parse_latex_value(m.group(1))
        if boxed is None:
            return f"unparseable boxed answer {m.group(1)!r}", None
        return (
            ""
            if boxed == done[0]
            else f"boxed {format_value(boxed)} but the result is {format_value(done[0])}"
        ), None
    m = _STEP_RE.match(step)
    if not m:
        return f"not a step of the form 'a op b = c': {step[:60]!r}", None
    a, op, b, c = m.groups()
    a, b, c = _parse_value(a), _parse_value(b), _parse_value(c)
    if a is None or b is None or c is None:
        return "zero denominator in a number", None
    if op == "/" and b == 0:
        return "division by zero", None
    expected = _apply(op, a, b)  # what a ready ``a op b`` (or ``b op a``) reduces to
    ka, kb = _key(a), _key(b)
    after = [new for s in states for new in _ready_reductions(s, op, ka, kb, expected)]
    if len(after) > 1:  # the same sub-expression twice: every choice is tracked, each distinct state once
        after = list(dict.fromkeys(after))
    if not after:
        return f"'{format_value(a)} {op} {format_value(b)}' is not an operation that can be done next", None
    if expected != c:
        return (f"arithmetic: {format_value(a)} {op} {format_value(b)} is {format_value(expected)}, "
                f"not {format_value(c)}"), None
    return "", after


def prefix_prompt(problem: str, steps: list[str] | tuple[str, ...], upto: int) -> str:
    """The prompt that continues a solution after step ``upto`` (``-1``: before the first step)."""
    text = PROMPT_TEMPLATE.format(problem=problem)
    if upto >= 0:
        text += STEP_SEPARATOR.join(steps[: upto + 1]) + STEP_SEPARATOR
    return text


def split_completion(text: str) -> list[str]:
    """Split generated text into steps (non-empty lines, stripped)."""
    return [line.strip() for line in text.split(STEP_SEPARATOR) if line.strip()]


# ---------------------------------------------------------------------------------------------- generator


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
                lv = _value(left)
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
        if op == "/" and _value(right) == 0:
            return False
        v = _value(node)
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
    value = _reference_steps(tree, steps)
    n_ops = len(steps)
    steps.append(answer_line(value))
    return {
        "id": id,
        "problem": f"Compute {_render(tree)}.",
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
