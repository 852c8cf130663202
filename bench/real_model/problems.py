"""Math problems with exact gold answers, MATH/GSM8K style, for the real-model grader differential test.

    python bench/real_model/problems.py [--n 300] [--seed 0] [--out problems.jsonl]

Each problem is ``{"id", "family", "format", "prompt", "gold"}``. ``prompt`` is the user message: the problem,
then one of five answer-format instructions (``FORMATS``; ``none`` adds nothing) so the model's answers come in
varied forms. Families cover the answer forms a grader meets: integers, money, percents, fractions, radicals,
pi, equations (``x = ...``, ``\\pm`` roots), intervals, points, solution sets, polynomials, inverse functions,
base-n numerals, multiple choice (A)-(E), yes/no and degrees. Parameters are random (seeded), golds are
computed exactly (``fractions.Fraction``, integer arithmetic) and written the way MATH/GSM8K write them.
Used by ``bench/real_model/generate.py`` on the GPU machine; the generated responses are triaged by hand into
``bench/grader_cases/real_model.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from fractions import Fraction

from answer_tex import factor_tex, frac_dec, frac_tex, lin_tex, money, poly_tex, rad_tex, simplify_sqrt  # noqa: E402

FORMATS = {
    "boxed": "Solve the problem step by step. Put the final answer in \\boxed{}.",
    "answer_is": "Solve the problem step by step. End your response with 'The answer is X', where X is the final answer.",
    "hash": "Solve the problem step by step. End your response with a line '#### X', where X is the final answer.",
    "final_answer": "Solve the problem step by step. Give the final answer after 'Final Answer:'.",
    "none": "",
}

NAMES = ["Maria", "James", "Aisha", "Tom", "Lena", "Carlos", "Priya", "Ben", "Sofia", "Omar", "Julia", "Ken"]


def gsm_int(rng):
    k = rng.randrange(4)
    n = rng.choice(NAMES)
    if k == 0:
        a, b, c = rng.randint(3, 9), rng.randint(12, 40), rng.randint(5, 30)
        return (
            f"{n} buys {a} boxes of pencils with {b} pencils in each box. She gives away {c} pencils. "
            f"How many pencils does she have left?",
            str(a * b - c),
        )
    if k == 1:
        sp, h, d = rng.randint(40, 70), rng.randint(2, 6), rng.randint(2, 5)
        return (
            f"A train travels at {sp} miles per hour for {h} hours each day. How many miles does it travel "
            f"in {d} days?",
            str(sp * h * d),
        )
    if k == 2:
        w, e, m = rng.randint(8, 20), rng.randint(3, 7), rng.randint(2, 4)
        return (
            f"{n} reads {w} pages on weekdays and {w + e} pages on each day of the weekend. How many pages "
            f"does {n} read in {m} weeks?",
            str(m * (5 * w + 2 * (w + e))),
        )
    t, g = rng.randint(3, 8), rng.randint(4, 9)
    s = t * g + rng.randint(1, g - 1)
    return (
        f"There are {s} students going on a trip. Each van holds {g} students. What is the smallest number "
        f"of vans needed?",
        str(-(-s // g)),
    )


def gsm_money(rng):
    n = rng.choice(NAMES)
    k = rng.randrange(3)
    if k == 0:
        p, q, paid = rng.randint(125, 475), rng.randint(2, 5), 0
        total = p * q
        paid = (total // 1000 + 1) * 1000 + rng.choice([0, 1000])
        return (
            f"{n} buys {q} notebooks at ${money(p)} each and pays with ${paid // 100}. How much change, in "
            f"dollars, does {n} get?",
            money(paid - total),
            True,
        )
    if k == 1:
        h, w = rng.randint(6, 30), rng.choice([1250, 1375, 1450, 1525, 1650])
        return (
            f"{n} earns ${money(w)} per hour and works {h} hours. How many dollars does {n} earn?",
            money(h * w),
            True,
        )
    price, pct = rng.choice([4000, 6000, 8500, 12000, 2500]), rng.choice([10, 15, 20, 25, 30])
    return (
        f"A jacket costs ${money(price)}. It is on sale for {pct}% off. What is the sale price in dollars?",
        money(price * (100 - pct) // 100),
        True,
    )


def gsm_percent(rng):
    k = rng.randrange(3)
    if k == 0:
        tot = rng.choice([20, 25, 40, 50, 80, 200])
        pct = rng.choice([5, 10, 15, 20, 35, 40, 60, 75])
        part = tot * pct // 100
        if part * 100 != tot * pct:
            pct, part = 25, tot // 4
        return (
            f"In a class of {tot} students, {part} students walk to school. What percent of the students walk "
            f"to school?",
            f"{pct}\\%",
        )
    if k == 1:
        old = rng.choice([40, 50, 80, 120, 200, 250])
        pct = rng.choice([10, 20, 25, 30, 50])
        new = old * (100 + pct) // 100  # rounded down for $50 and $250 at 25%: the gold is the exact rise
        return (
            f"The price of a ticket went from ${old} to ${new}. By what percent did the price increase?",
            frac_dec(Fraction(100 * (new - old), old)),
        )
    a, pct = rng.choice([60, 80, 120, 150, 240]), rng.choice([15, 25, 35, 45])
    return (f"What is {pct}% of {a}?", frac_tex(Fraction(a * pct, 100)))


def fraction(rng):
    k = rng.randrange(3)
    if k == 0:
        r, b = rng.randint(2, 9), rng.randint(2, 9)
        return (
            f"A bag has {r} red marbles and {b} blue marbles. One marble is drawn at random. What is the "
            f"probability that it is red? Express your answer as a common fraction.",
            frac_tex(Fraction(r, r + b)),
        )
    if k == 1:
        a, b, c, d = rng.randint(1, 5), rng.randint(2, 9), rng.randint(1, 5), rng.randint(2, 9)
        q = Fraction(a, b) + Fraction(c, d)
        return (
            f"Compute $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{d}}}$. Express your answer as a fraction in "
            f"simplest form.",
            frac_tex(q),
        )
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    c = rng.randint(1, 12)
    while Fraction(c, a).denominator == 1:
        c += 1
    return (
        f"Solve for $x$: ${a}x = {c}$. Express your answer as a common fraction.",
        frac_tex(Fraction(c, a)),
    )


def radical(rng):
    k = rng.randrange(3)
    if k == 0:
        a, b = rng.choice([(2, 2), (3, 2), (2, 3), (5, 2), (3, 3), (2, 5), (4, 2), (2, 7), (3, 5), (6, 2)])
        n = a * a * b
        return f"Simplify $\\sqrt{{{n}}}$.", rad_tex(a, b)
    if k == 1:
        x1, y1 = rng.randint(-5, 5), rng.randint(-5, 5)
        dx, dy = rng.choice([(1, 1), (2, 2), (1, 2), (3, 3), (2, 4), (1, 3), (3, 6), (2, 6)])
        a, b = simplify_sqrt(dx * dx + dy * dy)
        return (
            f"What is the distance between the points $({x1}, {y1})$ and $({x1 + dx}, {y1 - dy})$? Express "
            f"your answer in simplest radical form.",
            rad_tex(a, b),
        )
    s = rng.randint(2, 9)
    return (
        f"What is the length of the diagonal of a square with side length {s}? Express your answer in "
        f"simplest radical form.",
        rad_tex(s, 2),
    )


def pi_expr(rng):
    k = rng.randrange(3)
    if k == 0:
        r = rng.randint(2, 12)
        return (
            f"What is the area of a circle with radius {r}? Express your answer in terms of $\\pi$.",
            f"{r * r}\\pi",
        )
    if k == 1:
        r, h = rng.randint(2, 6), rng.randint(2, 10)
        return (
            f"A cylinder has radius {r} and height {h}. What is its volume? Express your answer in terms of "
            f"$\\pi$.",
            f"{r * r * h}\\pi",
        )
    d = rng.choice([30, 45, 60, 90, 120, 135, 150, 270])
    q = Fraction(d, 180)
    if q.numerator == 1:
        g = f"\\frac{{\\pi}}{{{q.denominator}}}"
    elif q.denominator == 1:
        g = f"{q.numerator}\\pi"
    else:
        g = f"\\frac{{{q.numerator}\\pi}}{{{q.denominator}}}"
    return f"Convert ${d}^\\circ$ to radians. Express your answer in terms of $\\pi$.", g


def linear_eq(rng):
    x = rng.randint(-9, 12)
    a = rng.choice([2, 3, 4, 5, 7, -2, -3])
    b = rng.randint(-15, 15)
    c = a * x + b
    if rng.random() < 0.5:
        return f"Solve for $x$: ${lin_tex(a, b)} = {c}$.", str(x)
    return f"Find the value of $x$ such that ${lin_tex(a, b)} = {c}$.", f"x = {x}"


def quadratic(rng):
    if rng.random() < 0.55:
        r1, r2 = sorted(rng.sample(range(-8, 9), 2))
        eq = poly_tex([1, -(r1 + r2), r1 * r2])
        gold = f"{r1}, {r2}" if rng.random() < 0.7 else f"x = {r1}, x = {r2}"
        return f"Find all solutions to ${eq} = 0$. Enter all the solutions, separated by commas.", gold
    p, q = rng.randint(-4, 4), rng.choice([2, 3, 5, 6, 7])
    # x = p ± sqrt(q): x^2 - 2p x + p^2 - q = 0
    eq = poly_tex([1, -2 * p, p * p - q])
    gold = f"{p} \\pm \\sqrt{{{q}}}" if p else f"\\pm \\sqrt{{{q}}}"
    return f"Solve ${eq} = 0$. Give the exact solutions.", gold


def inequality(rng):
    k = rng.randrange(3)
    if k == 0:
        a, b = rng.randint(2, 5), rng.randint(-6, 6)
        x0 = rng.randint(-4, 6)
        c = a * x0 + b
        op, br = rng.choice(
            [
                (">", f"({x0}, \\infty)"),
                ("\\ge", f"[{x0}, \\infty)"),
                ("<", f"(-\\infty, {x0})"),
                ("\\le", f"(-\\infty, {x0}]"),
            ]
        )
        return (
            f"Solve the inequality ${lin_tex(a, b)} {op} {c}$. Express your answer in interval notation.",
            br,
        )
    if k == 1:
        lo, hi = sorted(rng.sample(range(-6, 10), 2))
        s = rng.randint(1, 6)
        l_op, lb = rng.choice([("<", "("), ("\\le", "[")])
        r_op, rb = rng.choice([("<", ")"), ("\\le", "]")])
        return (
            f"Find all $x$ such that ${lo + s} {l_op} x + {s} {r_op} {hi + s}$. Express your answer in "
            f"interval notation.",
            f"{lb}{lo}, {hi}{rb}",
        )
    r1, r2 = sorted(rng.sample(range(-6, 7), 2))
    eq = poly_tex([1, -(r1 + r2), r1 * r2])
    if rng.random() < 0.5:
        return f"Solve ${eq} < 0$. Express your answer in interval notation.", f"({r1}, {r2})"
    return (
        f"Solve ${eq} \\ge 0$. Express your answer in interval notation.",
        f"(-\\infty, {r1}] \\cup [{r2}, \\infty)",
    )


def point(rng):
    k = rng.randrange(2)
    if k == 0:
        x, y = rng.randint(-6, 6), rng.randint(-6, 6)
        a1, b1 = rng.choice([(1, 1), (2, 1), (1, -1), (3, 2)])
        a2, b2 = rng.choice([(1, -2), (2, -1), (1, 3), (-1, 2)])
        if a1 * b2 == a2 * b1:
            a2, b2 = 1, -2
        c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
        e1 = lin_tex(a1, 0) + (f" + {lin_tex(b1, 0, 'y')}" if b1 > 0 else f" - {lin_tex(-b1, 0, 'y')}")
        e2 = lin_tex(a2, 0) + (f" + {lin_tex(b2, 0, 'y')}" if b2 > 0 else f" - {lin_tex(-b2, 0, 'y')}")
        return (
            f"Find the intersection point of the lines ${e1} = {c1}$ and ${e2} = {c2}$. Enter your answer as "
            f"an ordered pair $(x, y)$.",
            f"({x}, {y})",
        )
    x1, y1, x2, y2 = (rng.randint(-8, 8) for _ in range(4))
    mx, my = Fraction(x1 + x2, 2), Fraction(y1 + y2, 2)
    return (
        f"What is the midpoint of the segment with endpoints $({x1}, {y1})$ and $({x2}, {y2})$? Enter your "
        f"answer as an ordered pair.",
        f"\\left({frac_tex(mx)}, {frac_tex(my)}\\right)",
    )


def solution_set(rng):
    k = rng.randrange(2)
    if k == 0:
        c, d = rng.randint(-5, 5), rng.randint(1, 8)
        inner = f"x - {c}" if c > 0 else f"x + {-c}" if c < 0 else "x"
        return (
            f"Find all real numbers $x$ such that $|{inner}| = {d}$. Enter all the solutions, separated by "
            f"commas.",
            f"{c - d}, {c + d}",
        )
    n = rng.choice([4, 9, 16, 25, 36, 49])
    r = int(math.isqrt(n))
    return f"Find the set of all real solutions of $x^2 = {n}$.", f"\\{{-{r}, {r}\\}}"


def polynomial(rng):
    k = rng.randrange(3)
    if k == 0:
        a, b = rng.randint(-7, 7), rng.randint(-7, 7)
        coeffs = [1, a + b, a * b]
        fa = f"(x + {a})" if a > 0 else f"(x - {-a})" if a < 0 else "x"
        fb = f"(x + {b})" if b > 0 else f"(x - {-b})" if b < 0 else "x"
        return f"Expand ${fa}{fb}$.", poly_tex(coeffs)
    if k == 1:
        r1, r2 = rng.sample([i for i in range(-7, 8) if i], 2)
        eq = poly_tex([1, -(r1 + r2), r1 * r2])
        return f"Factor $ {eq} $ completely.", factor_tex(min(r1, r2)) + factor_tex(max(r1, r2))
    a, b = rng.randint(2, 7), rng.randint(-9, 9) or 1
    # f(x) = a x + b  ->  f^{-1}(x) = (x - b) / a
    num = f"x - {b}" if b > 0 else f"x + {-b}"
    return (f"Let $f(x) = {lin_tex(a, b)}$. Find $f^{{-1}}(x)$.", f"\\frac{{{num}}}{{{a}}}")


def function_value(rng):
    a, b, c = rng.randint(1, 4), rng.randint(-5, 5), rng.randint(-6, 6)
    m, n = rng.randint(2, 5), rng.randint(-4, 4)
    x = rng.randint(-3, 4)
    g = m * x + n
    f = a * g * g + b * g + c
    return (f"Let $f(x) = {poly_tex([a, b, c])}$ and $g(x) = {lin_tex(m, n)}$. What is $f(g({x}))$?", str(f))


def base_conv(rng):
    k = rng.randrange(3)
    if k == 0:
        n = rng.randint(9, 60)
        return f"Express ${n}$ in base 2.", f"{bin(n)[2:]}_2"
    if k == 1:
        n = rng.randint(9, 60)
        s = bin(n)[2:]
        return f"Convert ${s}_2$ to base 10.", str(n)
    b = rng.choice([3, 5, 7, 8])
    n = rng.randint(b * b, b * b * b - 1)
    digs, m = "", n
    while m:
        digs = str(m % b) + digs
        m //= b
    return f"Convert ${n}_{{10}}$ to base ${b}$.", f"{digs}_{b}"


def multiple_choice(rng):
    a, b = rng.randint(12, 40), rng.randint(3, 12)
    k = rng.randrange(2)
    if k == 0:
        ans = a * b
        q = f"What is ${a} \\times {b}$?"
    else:
        ans = a + b * b
        q = f"What is ${a} + {b}^2$?"
    opts = {ans}
    while len(opts) < 5:
        opts.add(ans + rng.choice([-20, -10, -2, -1, 1, 2, 10, 20, 11]))
    opts = sorted(opts)
    letter = "ABCDE"[opts.index(ans)]
    choices = " ".join(f"({L}) {v}" for L, v in zip("ABCDE", opts))
    gold = f"\\text{{({letter})}}" if rng.random() < 0.5 else letter
    return f"{q}\n\n{choices}\n\nAnswer with the letter of the correct option.", gold


def yes_no(rng):
    k = rng.randrange(2)
    if k == 0:
        n = rng.choice([51, 57, 61, 67, 71, 77, 87, 89, 91, 97, 101, 111, 113, 119, 127, 133])
        prime = all(n % p for p in range(2, int(n**0.5) + 1))
        ans = "Yes" if prime else "No"
        return f"Is ${n}$ a prime number? Answer yes or no.", (
            f"\\text{{{ans}}}" if rng.random() < 0.5 else ans
        )
    a, b = rng.randint(100, 999), rng.choice([3, 4, 6, 9, 11])
    if rng.random() < 0.5:
        a -= a % b
    ans = "Yes" if a % b == 0 else "No"
    return f"Is ${a}$ divisible by ${b}$? Answer yes or no.", ans


def degrees(rng):
    k = rng.randrange(2)
    if k == 0:
        n = rng.choice([5, 6, 8, 9, 10, 12, 15, 18, 20])
        return (
            f"What is the measure, in degrees, of each interior angle of a regular polygon with {n} sides?",
            f"{Fraction(180 * (n - 2), n)}^\\circ"
            if 180 * (n - 2) % n == 0
            else frac_tex(Fraction(180 * (n - 2), n)),
        )
    a, b = rng.randint(20, 80), rng.randint(20, 80)
    return (
        f"Two angles of a triangle measure ${a}^\\circ$ and ${b}^\\circ$. What is the measure of the third "
        f"angle?",
        f"{180 - a - b}^\\circ" if rng.random() < 0.6 else str(180 - a - b),
    )


def ratio_decimal(rng):
    k = rng.randrange(2)
    if k == 0:
        num = rng.choice([1, 3, 7, 9, 11, 13, 17])
        den = rng.choice([4, 8, 16, 20, 25, 40])
        q = Fraction(num, den)
        return f"Express $\\frac{{{q.numerator}}}{{{q.denominator}}}$ as a decimal.", str(
            q.numerator / q.denominator
        )
    p, q = rng.randint(2, 7), rng.randint(2, 7)
    while math.gcd(p, q) != 1 or p == q:
        p, q = rng.randint(2, 7), rng.randint(2, 7)
    k2 = rng.randint(3, 9)
    return (
        f"A recipe uses {p * k2} cups of flour and {q * k2} cups of sugar. What is the ratio of flour to "
        f"sugar in simplest form? Write it as a fraction.",
        frac_tex(Fraction(p, q)),
    )


FAMILIES = {
    "gsm_int": gsm_int, "gsm_money": gsm_money, "gsm_percent": gsm_percent, "fraction": fraction,
    "radical": radical, "pi": pi_expr, "linear_eq": linear_eq, "quadratic": quadratic,
    "inequality": inequality, "point": point, "solution_set": solution_set, "polynomial": polynomial,
    "function_value": function_value, "base": base_conv, "multiple_choice": multiple_choice, "yes_no": yes_no,
    "degrees": degrees, "ratio_decimal": ratio_decimal,
}  # fmt: skip


def make_problems(n: int = 300, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    fams = list(FAMILIES)
    fmts = list(FORMATS)
    out, seen = [], set()
    i = 0
    while len(out) < n:
        fam = fams[i % len(fams)]
        fmt = fmts[(i // len(fams)) % len(fmts)]  # every family meets every format
        i += 1
        r = FAMILIES[fam](rng)
        text, gold = r[0], r[1]
        if text in seen:
            continue
        seen.add(text)
        instr = FORMATS[fmt]
        prompt = f"{text}\n\n{instr}" if instr else text
        out.append({"id": len(out), "family": fam, "format": fmt, "prompt": prompt, "gold": gold})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="-")
    a = ap.parse_args(argv)
    rows = make_problems(a.n, a.seed)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if a.out == "-":
        print(lines, end="")
    else:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
