"""Generate differential test cases for the math answer grader (stdlib only, deterministic).

    python bench/grader_cases/make_cases.py

Writes three JSON Lines files next to this script; each line is
``{"gold": str, "response": str, "expected": bool, "source": "<generator>:<form>"}``.

* ``real_style.jsonl``         full chain-of-thought responses in the styles of Qwen2.5 / Llama / DeepSeek /
                               Mistral / Minerva, with many final-answer styles (and truncated ones).
* ``bare_answers.jsonl``       responses that are only the answer in some markup.
* ``adversarial_formats.jsonl`` tricky formats whose verdict is still clear to a human.

The verdict is known by construction: a ``true`` case ends with an answer that is the gold answer or an
equivalent rewriting of it; a ``false`` case ends with a clearly different value of the same shape, or has
no final answer at all (truncated).
"""

from __future__ import annotations

import json
import math
import os
import random
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
LE, GE, CDOT, PI, AREA = "\\le", "\\ge", "\\cdot", "\\pi", "A = \\frac{1}{2}bh"
SQUAREFREE = [2, 3, 5, 6, 7, 10, 11, 13, 14, 15]


# ---------------------------------------------------------------------------------------------------------
# Gold families: each generator returns a dict with
#   gold: str, true: [equivalent forms], false: [clearly different forms of the same shape],
#   kind: str (family name), numeric: bool (fits a GSM8K "#### X" line), latex: bool (needs math delimiters)
# ---------------------------------------------------------------------------------------------------------


def fam(kind, gold, true, false, numeric=False):
    true = list(dict.fromkeys(true))
    false = [f for f in dict.fromkeys(false) if f not in true]
    return {"kind": kind, "gold": gold, "true": true, "false": false, "numeric": numeric}


def commas(n: int, sep=",") -> str:
    s = f"{abs(n):,}".replace(",", sep)
    return ("-" if n < 0 else "") + s


def g_int(r):
    n = r.choice([r.randint(2, 99), r.randint(100, 999), r.randint(2, 60)])
    f = [str(n + 1), str(n - 1), str(n + 10), str(2 * n)]
    s = str(n)
    if len(s) > 1 and s[::-1] != s and not s.endswith("0"):
        f.append(s[::-1])
    return fam("integer", str(n), [str(n), f"{n}.0" if r.random() < 0.3 else str(n)], f, numeric=True)


def g_negative(r):
    n = -r.randint(2, 150)
    return fam("negative", str(n), [str(n), f"-{abs(n)}", f"- {abs(n)}"], [str(-n), str(n + 1), str(n - 1)], numeric=True)


def g_decimal(r):
    cents = r.choice([25, 5, 75, 4, 125, 35, 8, 6])
    whole = r.randint(0, 20)
    v = Fraction(whole) + Fraction(cents, 10 ** len(str(cents)) if cents >= 10 else 10)
    s = f"{float(v):g}"
    t = [s, f"\\frac{{{v.numerator}}}{{{v.denominator}}}", f"{v.numerator}/{v.denominator}"]
    if s.startswith("0."):
        t.append(s[1:])
    w1 = f"{float(v + Fraction(1, 10)):g}"
    w2 = f"{float(v * 10):g}"
    w3 = f"{float(v + 1):g}"
    return fam("decimal", s, t, [w1, w2, w3], numeric=True)


def g_thousands(r):
    n = r.randint(1001, 999999)
    while n % 1000 == 0:
        n = r.randint(1001, 999999)
    style = r.choice(["comma", "bang", "plain"])
    gold = {"comma": commas(n), "bang": commas(n, ",\\!"), "plain": str(n)}[style]
    t = [str(n), commas(n), commas(n, ",\\!"), commas(n, "{,}")]
    f = [str(n + 1), commas(n + 100), str(n - 9), str(n * 10)]
    return fam("thousands", gold, t, f, numeric=True)


def g_fraction(r):
    b = r.choice([3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 20])
    a = r.randint(1, 3 * b)
    while math.gcd(a, b) != 1 or a % b == 0:
        a = r.randint(1, 3 * b)
    neg = r.random() < 0.2
    sg = "-" if neg else ""
    gold = r.choice([f"{sg}\\frac{{{a}}}{{{b}}}", f"{sg}\\dfrac{{{a}}}{{{b}}}", f"{sg}{a}/{b}"])
    t = [f"{sg}\\frac{{{a}}}{{{b}}}", f"{sg}\\dfrac{{{a}}}{{{b}}}", f"{sg}{a}/{b}", f"{sg}\\frac{{{2 * a}}}{{{2 * b}}}",
         f"{sg}\\tfrac{{{a}}}{{{b}}}"]
    if a < 10 and b < 10:
        t.append(f"{sg}\\dfrac{a}{b}")
        t.append(f"{sg}\\frac{a}{b}")
    if neg:
        t.append(f"\\frac{{-{a}}}{{{b}}}")
    den = b
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den == 1:
        t.append(sg + f"{a / b:g}")
    f = [f"{sg}\\frac{{{b}}}{{{a}}}" if a != 1 else f"{sg}{b}", f"{sg}\\frac{{{a + 1 if a + 1 != b else a + 2}}}{{{b}}}",
         f"{'' if neg else '-'}\\frac{{{a}}}{{{b}}}", f"{sg}\\frac{{{a}}}{{{b + 1}}}"]
    return fam("fraction", gold, t, f)


def g_radical(r):
    k, m = r.randint(2, 9), r.choice(SQUAREFREE)
    m2 = r.choice([x for x in SQUAREFREE if x != m])
    t = [f"{k}\\sqrt{{{m}}}", f"\\sqrt{{{k * k * m}}}", f"{k} \\sqrt{{{m}}}"]
    if m < 10:
        t.append(f"{k}\\sqrt{m}")
    f = [f"{k + 1}\\sqrt{{{m}}}", f"{k}\\sqrt{{{m2}}}", f"\\sqrt{{{k * m}}}"]
    return fam("radical", f"{k}\\sqrt{{{m}}}", t, f)


def g_frac_sqrt(r):
    m, d = r.choice(SQUAREFREE[:7]), r.randint(2, 9)
    m2 = r.choice([x for x in SQUAREFREE[:7] if x != m])
    gold = r.choice([f"\\frac{{\\sqrt{{{m}}}}}{{{d}}}", f"\\dfrac{{\\sqrt{{{m}}}}}{{{d}}}"])
    t = [f"\\frac{{\\sqrt{{{m}}}}}{{{d}}}", f"\\frac{{1}}{{{d}}}\\sqrt{{{m}}}", f"\\sqrt{{{m}}}/{d}",
         f"\\frac{{{m}}}{{{d}\\sqrt{{{m}}}}}", f"\\dfrac{{\\sqrt{m}}}{{{d}}}"]
    f = [f"\\frac{{\\sqrt{{{m2}}}}}{{{d}}}", f"\\frac{{\\sqrt{{{m}}}}}{{{d + 1}}}", f"\\frac{{{d}}}{{\\sqrt{{{m}}}}}",
         f"\\frac{{{m}}}{{{d}}}"]
    return fam("frac_sqrt", gold, t, f)


def g_pi(r):
    c = r.randint(0, 2)
    if c == 0:
        k = r.randint(2, 64)
        return fam("pi", f"{k}\\pi", [f"{k}\\pi", f"{k} \\pi", f"\\pi \\cdot {k}"], [f"{k + 1}\\pi", f"{2 * k}\\pi", str(k)])
    if c == 1:
        a, b = r.choice([(1, 3), (1, 4), (1, 6), (2, 3), (3, 4), (5, 6), (1, 12), (7, 4)])
        num = "\\pi" if a == 1 else f"{a}\\pi"
        gold = f"\\frac{{{num}}}{{{b}}}"
        t = [gold, f"{num}/{b}", f"\\frac{{{a}}}{{{b}}}\\pi", f"\\dfrac{{{num}}}{{{b}}}"]
        num2 = f"{a + 1}\\pi"
        f = [f"\\frac{{{num2}}}{{{b}}}", f"\\frac{{{num}}}{{{b + 1}}}", f"\\frac{{{a}}}{{{b}}}"]
        return fam("pi", gold, t, f)
    a, b = r.randint(2, 40), r.randint(2, 12)
    g = math.gcd(a, b)
    t = [f"{a} + {b}\\pi", f"{b}\\pi + {a}", f"{a}+{b}\\pi"]
    if g > 1:
        t.append(f"{g}({a // g} + {b // g}\\pi)")
    f = [f"{a} + {b + 1}\\pi", f"{a} - {b}\\pi", f"{a + b}\\pi"]
    return fam("pi", f"{a} + {b}\\pi", t, f)


def ineq(a, b, lo, hi, var="x"):
    a_s, b_s = str(a), str(b)
    parts = []
    if a is not None:
        parts.append(f"{a_s} {'<' if lo == '(' else LE} ")
    parts.append(var)
    if b is not None:
        parts.append(f" {'<' if hi == ')' else LE} {b_s}")
    return "".join(parts)


def g_interval(r):
    a = r.randint(-9, 5)
    b = a + r.randint(1, 9)
    kind = r.randint(0, 2)
    if kind == 0:
        lo, hi = r.choice("(["), r.choice(")]")
        gold = f"{lo}{a}, {b}{hi}"
        t = [gold, f"{lo}{a},{b}{hi}", f"\\left{lo}{a}, {b}\\right{hi}", ineq(a, b, lo, hi)]
        flo = "[" if lo == "(" else "("
        fhi = "]" if hi == ")" else ")"
        f = [f"{flo}{a}, {b}{hi}", f"{lo}{a}, {b}{fhi}", f"{lo}{a}, {b + 1}{hi}", f"{lo}{a - 1}, {b}{hi}"]
        return fam("interval", gold, t, f)
    if kind == 1:
        lo = r.choice("([")
        gold = f"{lo}{a}, \\infty)"
        t = [gold, f"{lo}{a},\\infty)", f"x {'>' if lo == '(' else GE} {a}", f"\\left{lo}{a}, \\infty\\right)"]
        flo = "[" if lo == "(" else "("
        f = [f"{flo}{a}, \\infty)", f"{lo}{a + 1}, \\infty)", f"(-\\infty, {a}{']' if lo == '(' else ')'}"]
        return fam("interval", gold, t, f)
    hi = r.choice(")]")
    gold = f"(-\\infty, {b}{hi}"
    t = [gold, f"(-\\infty,{b}{hi}", f"x {'<' if hi == ')' else LE} {b}", f"\\left(-\\infty, {b}\\right{hi}"]
    fhi = "]" if hi == ")" else ")"
    f = [f"(-\\infty, {b}{fhi}", f"(-\\infty, {b - 1}{hi}", f"({b}, \\infty)" if hi == "]" else f"[{b}, \\infty)"]
    return fam("interval", gold, t, f)


def g_union(r):
    a = r.randint(-9, 2)
    b = a + r.randint(1, 8)
    c = r.randint(0, 1)
    if c == 0:
        gold = f"(-\\infty, {a}) \\cup ({b}, \\infty)"
        t = [gold, f"(-\\infty,{a})\\cup({b},\\infty)", f"({b}, \\infty) \\cup (-\\infty, {a})"]
        f = [f"(-\\infty, {a}] \\cup [{b}, \\infty)", f"({a}, {b})", f"(-\\infty, {a}) \\cup ({b + 1}, \\infty)"]
    else:
        gold = f"[{a}, {b}) \\cup ({b}, {b + 3}]"
        t = [gold, f"[{a},{b})\\cup({b},{b + 3}]", f"\\left[{a}, {b}\\right) \\cup \\left({b}, {b + 3}\\right]"]
        f = [f"[{a}, {b + 3}]", f"({a}, {b}) \\cup ({b}, {b + 3})", f"[{a}, {b}) \\cup ({b}, {b + 4}]"]
    return fam("union", gold, t, f)


def g_tuple(r):
    n = r.choice([2, 2, 3])
    v = [r.randint(-9, 12) for _ in range(n)]
    while len(set(v)) < n:
        v = [r.randint(-9, 12) for _ in range(n)]
    j = lambda xs, s=", ": s.join(map(str, xs))  # noqa: E731
    gold = f"({j(v)})"
    t = [gold, f"({j(v, ',')})", f"\\left({j(v)}\\right)"]
    sw = v[:]
    sw[0], sw[1] = sw[1], sw[0]
    neg = v[:]
    k = next(i for i, x in enumerate(v) if x != 0)
    neg[k] = -neg[k]
    off = v[:]
    off[-1] += 1
    f = [f"({j(sw)})", f"({j(neg)})", f"({j(off)})"]
    return fam("tuple", gold, t, f)


def g_set(r):
    n = r.randint(2, 4)
    v = sorted(r.sample(range(-6, 15), n))
    j = lambda xs, s=", ": s.join(map(str, xs))  # noqa: E731
    gold = f"\\{{{j(v)}\\}}"
    p = v[:]
    while p == v:
        r.shuffle(p)
    t = [gold, f"\\{{{j(p)}\\}}", f"\\{{{j(v, ',')}\\}}", f"\\left\\{{{j(p)}\\right\\}}"]
    ch = v[:]
    ch[-1] = max(v) + 1
    f = [f"\\{{{j(ch)}\\}}", f"\\{{{j(v[:-1])}\\}}", f"\\{{{j([x + 1 for x in v])}\\}}"]
    return fam("set", gold, t, f)


def g_list(r):
    n = r.randint(2, 3)
    v = sorted(r.sample(range(-8, 12), n))
    j = lambda xs, s=", ": s.join(map(str, xs))  # noqa: E731
    gold = j(v)
    p = v[::-1]
    t = [gold, j(v, ","), j(p)]
    ch = v[:]
    ch[0] = ch[0] - 1 if ch[0] - 1 not in v else min(v) - 2
    f = [j(ch), j(v[1:]) if n == 3 else j([v[0], v[1] + 7]), j([-x for x in v]) if any(v) else j([x + 1 for x in v])]
    return fam("list", gold, t, f)


def poly_str(coefs, var="x"):
    """coefs from highest degree; returns e.g. 'x^2 - 5x + 6'."""
    deg = len(coefs) - 1
    out = []
    for i, c in enumerate(coefs):
        p = deg - i
        if c == 0:
            continue
        mono = "" if p == 0 else (var if p == 1 else f"{var}^{p}")
        mag = abs(c)
        body = str(mag) if (mag != 1 or p == 0) else ""
        body += mono
        if not out:
            out.append(("-" if c < 0 else "") + body)
        else:
            out.append(("- " if c < 0 else "+ ") + body)
    return " ".join(out) if out else "0"


def g_equation(r):
    m = r.choice([x for x in range(-6, 7) if x not in (0, 1)])
    c = r.choice([x for x in range(-9, 10) if x != 0])
    rhs = poly_str([m, c])
    gold = f"y = {rhs}"
    t = [gold, rhs, f"y={rhs.replace(' ', '')}", f"y = {c} {'+' if m > 0 else '-'} {abs(m)}x"]
    f = [f"y = {poly_str([m, -c])}", f"y = {poly_str([c, m])}" if c != m else f"y = {poly_str([m + 1, c])}",
         f"y = {poly_str([m + 1, c])}"]
    return fam("equation", gold, t, f)


def g_poly(r):
    r1, r2 = r.sample([x for x in range(-7, 8) if x != 0], 2)
    coefs = [1, -(r1 + r2), r1 * r2]
    lead = r.choice([1, 1, 2])
    coefs = [lead * c for c in coefs]
    gold = poly_str(coefs)
    fac = lambda rr: f"(x {'-' if rr > 0 else '+'} {abs(rr)})"  # noqa: E731
    lp = "" if lead == 1 else str(lead)
    t = [gold, f"{lp}{fac(r1)}{fac(r2)}", f"{lp}{fac(r2)}{fac(r1)}", gold.replace(" ", "")]
    parts = [c for c in [coefs[2]] if c]
    rev = f"{coefs[2]} {'+' if coefs[1] > 0 else '-'} {abs(coefs[1])}x + {'' if lead == 1 else lead}x^2" if coefs[1] else None
    if rev and parts:
        t.append(rev)
    f = [f"{lp}{fac(-r1)}{fac(-r2)}", poly_str([coefs[0], coefs[1], -coefs[2]]), f"{lp}{fac(r1)}{fac(r2 + 1 if r2 + 1 != 0 else r2 + 2)}"]
    return fam("polynomial", gold, t, f)


def g_matrix(r):
    rows, cols = r.choice([(2, 2), (2, 2), (2, 1), (3, 1)])
    v = [[r.randint(-9, 9) for _ in range(cols)] for _ in range(rows)]
    while (rows == cols and v[0][1] == v[1][0]) or len({x for row in v for x in row}) < 2:
        v = [[r.randint(-9, 9) for _ in range(cols)] for _ in range(rows)]

    def mat(m, env="pmatrix", sp=True):
        if sp:
            body = " \\\\ ".join(" & ".join(map(str, row)) for row in m)
            return f"\\begin{{{env}}} {body} \\end{{{env}}}"
        body = "\\\\".join("&".join(map(str, row)) for row in m)
        return f"\\begin{{{env}}}{body}\\end{{{env}}}"

    gold = mat(v)
    t = [gold, mat(v, sp=False), mat(v, "bmatrix")]
    w1 = [row[:] for row in v]
    w1[-1][-1] += 1
    w2 = [[-x for x in row] for row in v]
    f = [mat(w1), mat(w2)]
    if rows == cols:
        f.append(mat([list(c) for c in zip(*v)]))
    else:
        f.append(mat(v[::-1]) if v[0] != v[-1] else mat(w1))
    return fam("matrix", gold, t, f)


def g_degree(r):
    n = r.choice([15, 30, 36, 40, 45, 60, 72, 75, 80, 105, 108, 120, 135, 150, 210, 240])
    gold = r.choice([f"{n}^\\circ", f"{n}^{{\\circ}}"])
    return fam("degree", gold, [f"{n}^\\circ", str(n), f"{n}^{{\\circ}}", f"{n} degrees"],
               [f"{n + 10}^\\circ", str(180 - n) if 180 - n != n and n < 180 else str(n + 5), f"{2 * n}^\\circ"], numeric=True)


def g_percent(r):
    n = r.choice([5, 12, 15, 20, 25, 30, 35, 40, 45, 60, 64, 75, 80, 125])
    return fam("percent", f"{n}\\%", [f"{n}\\%", str(n), f"{n}\\,\\%", f"{n} percent"],
               [f"{n + 5}\\%", str(100 - n) if 100 - n != n and n < 100 else str(n + 10), f"{n * 2}\\%"], numeric=True)


def g_money(r):
    d, c = r.randint(1, 250), r.choice([0, 5, 10, 20, 25, 50, 75, 40, 99])
    v = f"{d}.{c:02d}"
    short = f"{d}.{c // 10}" if c % 10 == 0 else v
    gold = r.choice([f"\\${v}", f"\\${v}"]) if c else r.choice([f"\\${d}", f"\\${d}.00"])
    t = [f"\\${v}", v, short, f"\\${short}"] if c else [f"\\${d}", str(d), f"{d}.00", f"\\${d}.00"]
    f = [f"\\${d + 1}.{c:02d}", f"\\${d}.{(c + 5) % 100:02d}", f"{d * 10 + c // 10}"]
    return fam("money", gold, t, f, numeric=True)


def g_text(r):
    c = r.randint(0, 3)
    if c == 0:
        L = r.choice("ABCDE")
        o = r.choice([x for x in "ABCDE" if x != L])
        gold = r.choice([f"\\text{{({L})}}", f"({L})", f"\\textbf{{({L})}}", L])
        return fam("choice", gold, [f"\\text{{({L})}}", L, f"({L})", f"\\text{{{L}}}", f"\\textbf{{({L})}}", f"\\mathrm{{({L})}}"],
                   [f"\\text{{({o})}}", o, f"({o})"])
    if c == 1:
        days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        d = r.choice(days)
        o = r.choice([x for x in days if x != d])
        gold = r.choice([f"\\text{{{d}}}", d])
        return fam("text", gold, [f"\\text{{{d}}}", d, f"\\textbf{{{d}}}", f"\\text{{{d.lower()}}}"],
                   [f"\\text{{{o}}}", o])
    if c == 2:
        w, o = r.choice([("odd", "even"), ("even", "odd"), ("odd", "neither"), ("even", "neither")])
        gold = r.choice([f"\\text{{{w}}}", w])
        return fam("text", gold, [f"\\text{{{w}}}", w, f"\\textbf{{{w}}}"], [f"\\text{{{o}}}", o])
    w, o = r.choice([("Alice", "Bob"), ("Bob", "Alice"), ("Carla", "Dana"), ("north", "south"), ("red", "blue")])
    return fam("text", f"\\text{{{w}}}", [f"\\text{{{w}}}", w, f"\\mathrm{{{w}}}"], [f"\\text{{{o}}}", o])


def g_complex(r):
    a = r.choice([x for x in range(-9, 10) if x != 0])
    b = r.choice([x for x in range(-9, 10) if x not in (0, 1, -1) and abs(x) != abs(a)])
    gold = f"{a} {'+' if b > 0 else '-'} {abs(b)}i"
    t = [gold, f"{b}i {'+' if a > 0 else '-'} {abs(a)}", gold.replace(" ", ""), f"{a} {'+' if b > 0 else '-'} {abs(b)} i"]
    f = [f"{a} {'-' if b > 0 else '+'} {abs(b)}i", f"{b} {'+' if a > 0 else '-'} {abs(a)}i", f"{-a} {'+' if b > 0 else '-'} {abs(b)}i"]
    return fam("complex", gold, t, f)


def g_base(r):
    base = r.choice([2, 2, 3, 5, 6, 7, 8])
    n = r.randint(base * 2, base ** 4)

    def to(nn):
        s = ""
        while nn:
            s = str(nn % base) + s
            nn //= base
        return s

    s = to(n)
    gold = f"{s}_{base}" if base < 10 else s
    t = [f"{s}_{base}", f"{s}_{{{base}}}"]
    f = [f"{to(n + 1)}_{base}", f"{to(n - 1)}_{base}"]
    return fam("base", gold, t, f)


def g_units(r):
    n = r.randint(2, 480)
    u = r.choice(["cm", "m", "inches", "feet", "square units", "cm^2", "meters", "km", "units"])
    gold = r.choice([f"{n} \\text{{ {u}}}", f"{n}\\text{{ {u}}}", f"{n} \\mbox{{ {u}}}"]) if "^" not in u else f"{n} \\text{{ cm}}^2"
    uu = "cm}^2" if "^" in u else u + "}"
    t = [str(n), f"{n} \\text{{ {uu}", f"{n}\\ \\text{{{uu}", f"{n}\\text{{{uu}"]
    f = [f"{n + 1} \\text{{ {uu}", str(n * 2), f"{n + 10}"]
    return fam("units", gold, t, f, numeric=True)


def g_pm(r):
    a = r.randint(-6, 9)
    m = r.choice(SQUAREFREE[:8])
    a_s = "" if a == 0 else str(a)
    gold = f"{a_s} \\pm \\sqrt{{{m}}}".strip()
    t = [gold, gold.replace(" ", ""), f"{a_s} + \\sqrt{{{m}}}, {a_s} - \\sqrt{{{m}}}".replace(" ", "") if a else f"\\sqrt{{{m}}}, -\\sqrt{{{m}}}",
         f"{a_s} - \\sqrt{{{m}}}, {a_s} + \\sqrt{{{m}}}" if a else f"-\\sqrt{{{m}}}, \\sqrt{{{m}}}"]
    m2 = r.choice([x for x in SQUAREFREE[:8] if x != m])
    f = [f"{a_s} \\pm \\sqrt{{{m2}}}".strip(), f"{a + 1} \\pm \\sqrt{{{m}}}", f"{a_s} + \\sqrt{{{m}}}".strip()]
    return fam("plusminus", gold, t, f)


def g_xeq(r):
    n = r.choice([x for x in range(-20, 40) if x != 0])
    frac = r.random() < 0.3
    if frac:
        b = r.choice([2, 3, 4, 5, 7])
        a = r.choice([x for x in range(1, 30) if math.gcd(x, b) == 1])
        v = f"\\frac{{{a}}}{{{b}}}"
        return fam("x_equals", f"x = {v}", [v, f"x={v}", f"x = {a}/{b}", f"{a}/{b}"],
                   [f"x = \\frac{{{a + 1}}}{{{b}}}", f"x = \\frac{{{b}}}{{{a}}}" if a != 1 else f"x = {b}", f"x = -{v}"])
    return fam("x_equals", f"x = {n}", [str(n), f"x={n}", f"x = {n}"], [f"x = {n + 1}", f"x = {-n}", str(n - 1)])


GENS = [
    (g_int, 8), (g_negative, 3), (g_decimal, 4), (g_thousands, 4), (g_fraction, 8), (g_radical, 4), (g_frac_sqrt, 3),
    (g_pi, 4), (g_interval, 5), (g_union, 2), (g_tuple, 4), (g_set, 3), (g_list, 3), (g_equation, 3), (g_poly, 3),
    (g_matrix, 3), (g_degree, 3), (g_percent, 3), (g_money, 3), (g_text, 4), (g_complex, 3), (g_base, 3),
    (g_units, 3), (g_pm, 3), (g_xeq, 3),
]


def pick_family(r):
    gens, weights = zip(*GENS)
    return r.choices(gens, weights)[0](r)


# ---------------------------------------------------------------------------------------------------------
# Reasoning text
# ---------------------------------------------------------------------------------------------------------

OPENERS = {
    "qwen": ["To solve this problem, we need to carefully work through each part step by step.",
             "To determine the answer, let's break the problem down into smaller steps.",
             "Let's analyze the problem systematically."],
    "llama": ["## Step 1: Understand the problem", "## Step 1: Identify the given information",
              "## Step 1: Set up the problem"],
    "deepseek": ["Okay, so I need to figure this out. Let me start by writing down what is given.",
                 "Alright, let me think about this problem carefully.", "Hmm, let me see. First I'll restate the problem."],
    "mistral": ["We begin by restating the problem in mathematical terms.", "First, let us recall the relevant facts.",
                "Let us approach this problem methodically."],
    "minerva": ["We have that", "Note that", "Let us first compute the relevant quantities."],
}

TOPICS = {
    "integer": "count", "negative": "value", "decimal": "value", "thousands": "total", "fraction": "probability",
    "radical": "length", "frac_sqrt": "value", "pi": "area", "interval": "domain", "union": "solution set",
    "tuple": "ordered pair", "set": "set of solutions", "list": "solutions", "equation": "line", "polynomial": "polynomial",
    "matrix": "matrix", "degree": "angle", "percent": "percentage", "money": "cost", "choice": "option", "text": "answer",
    "complex": "complex number", "base": "base representation", "units": "length", "plusminus": "roots",
    "x_equals": "solution",
}


def arith_line(r):
    a, b = r.randint(2, 40), r.randint(2, 30)
    op = r.choice(["+", "-", "\\times", "\\cdot"])
    c = {"+": a + b, "-": a - b, "\\times": a * b, "\\cdot": a * b}[op]
    return a, op, b, c


def math_wrap(r, s):
    return r.choice([f"${s}$", f"\\({s}\\)"])


def paragraph(r, model, topic, step):
    a, op, b, c = arith_line(r)
    x, y = r.randint(2, 12), r.randint(2, 12)
    choices = [
        f"First, we compute {math_wrap(r, f'{a} {op} {b} = {c}')}. This gives us the intermediate quantity we need.",
        f"Substituting the known values, we get\n\\[\n{a} {op} {b} = {c}.\n\\]",
        f"We can simplify the expression:\n\\[\n\\begin{{aligned}}\n{x}({y} + {a}) &= {x} \\cdot {y} + {x} \\cdot {a} \\\\\n&= {x * y} + {x * a} \\\\\n&= {x * y + x * a}.\n\\end{{aligned}}\n\\]",
        f"- The first quantity is {math_wrap(r, str(a))}.\n- The second quantity is {math_wrap(r, str(b))}.\n- Combining them gives {math_wrap(r, f'{a} {op} {b} = {c}')}.",
        f"Notice that **the key observation** is that the {topic} depends only on {math_wrap(r, f'n = {x}')}. Since {math_wrap(r, f'{x} {CDOT} {y} = {x * y}')}, we can proceed.",
        f"Let {math_wrap(r, 'k')} be the unknown. Then {math_wrap(r, f'{x}k + {a} = {x * y + a}')}, so {math_wrap(r, f'{x}k = {x * y}')} and {math_wrap(r, f'k = {y}')}.",
        f"Using the formula {math_wrap(r, AREA)}, with {math_wrap(r, f'b = {2 * x}')} and {math_wrap(r, f'h = {y}')}, we get {math_wrap(r, f'A = {x * y}')}.",
        f"We check the constraint: since {math_wrap(r, f'{a} > {min(a, b) - 1}')}, the condition is satisfied, and we move on to the {topic}.",
    ]
    p = r.choice(choices)
    if model == "llama":
        head = r.choice(["Calculate the intermediate value", "Simplify the expression", "Apply the formula",
                         "Use the given condition", "Combine the results"])
        return f"## Step {step}: {head}\n{p}"
    if model == "qwen" and r.random() < 0.6:
        head = r.choice(["Set up the equation", "Simplify", "Compute the values", "Verify the result", "Combine"])
        return f"### Step {step}: {head}\n{p}"
    if model == "deepseek" and r.random() < 0.4:
        return r.choice(["Wait, let me double-check that. ", "Hmm, ", "So, ", "Let me verify: "]) + p
    return p


def reasoning(r, model, topic, n=None):
    n = n or r.randint(2, 5)
    parts = [r.choice(OPENERS[model])]
    for i in range(n):
        parts.append(paragraph(r, model, topic, i + 2 if model == "llama" else i + 1))
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------------------
# Final-answer styles
# ---------------------------------------------------------------------------------------------------------


def needs_math(ans):
    return any(ch in ans for ch in "\\^_{}")


def plain_or_math(r, ans, p=0.75):
    return f"${ans}$" if (needs_math(ans) and r.random() < p) or r.random() < 0.15 else ans


FINAL_STYLES = [
    "boxed_bare", "boxed_display", "boxed_dollar", "boxed_then_sentence", "final_answer_is_boxed", "minerva",
    "final_answer_heading", "answer_colon", "bold_answer", "gsm8k", "therefore", "bare_last_line", "answer_is_paren",
    "two_boxes", "llama_final",
]


def final(r, style, ans, fam_, topic):
    """Return the closing text of a response whose final answer is ``ans``."""
    if style == "boxed_bare":
        return f"Thus, the {topic} is \\boxed{{{ans}}}."
    if style == "boxed_display":
        return f"Therefore, the {topic} is:\n\\[\n\\boxed{{{ans}}}\n\\]"
    if style == "boxed_dollar":
        return f"So the final answer is ${{\\boxed{{{ans}}}}}$." if r.random() < 0.3 else f"Hence the {topic} is $\\boxed{{{ans}}}$."
    if style == "boxed_then_sentence":
        tail = r.choice(["This completes the solution.", "I hope this helps!",
                         "We can verify this by substituting back into the original equation.",
                         "Let me know if you have any questions."])
        return f"Putting everything together, the {topic} is \\(\\boxed{{{ans}}}\\).\n\n{tail}"
    if style == "final_answer_is_boxed":
        return f"The final answer is $\\boxed{{{ans}}}$."
    if style == "minerva":
        return f"Final Answer: The final answer is ${ans}$. I hope it is correct."
    if style == "final_answer_heading":
        return f"**Final Answer**\n\\[\n\\boxed{{{ans}}}\n\\]"
    if style == "answer_colon":
        return f"Answer: {plain_or_math(r, ans)}"
    if style == "bold_answer":
        return f"**Answer:** {plain_or_math(r, ans)}"
    if style == "gsm8k":
        return f"#### {ans}"
    if style == "therefore":
        return f"Therefore, the answer is {plain_or_math(r, ans, 0.9)}."
    if style == "bare_last_line":
        return plain_or_math(r, ans, 0.6)
    if style == "answer_is_paren":
        return f"So, the answer is \\({ans}\\)."
    if style == "llama_final":
        return f"The final answer is: $\\boxed{{{ans}}}$"
    raise ValueError(style)


def gsm_form(ans, fam_):
    """GSM8K '#### X' lines carry plain numbers."""
    return ans.replace("\\$", "").replace("\\%", "").replace("^\\circ", "").replace("^{\\circ}", "")


def real_style_case(r, i):
    fam_ = pick_family(r)
    topic = TOPICS[fam_["kind"]]
    model = r.choice(list(OPENERS))
    body = reasoning(r, model, topic)
    if r.random() < 0.06:  # truncated: cut mid-sentence, no final answer
        cut = r.choice(["Now we substitute this into the second equation to get $", "So the next step is to compute the",
                        "Therefore, the total number of", "Combining the two cases, we find that the \\(",
                        "Finally, we need to divide by"])
        return {"gold": fam_["gold"], "response": body + "\n\n" + cut, "expected": False,
                "source": f"real_style:truncated:{fam_['kind']}"}
    expected = r.random() < 0.5
    ans = r.choice(fam_["true"] if expected else fam_["false"])
    style = r.choice(FINAL_STYLES)
    if model == "minerva":
        style = "minerva" if r.random() < 0.7 else style
    if style == "gsm8k" and not fam_["numeric"]:
        style = "boxed_bare"
    if style == "gsm8k":
        ans2 = gsm_form(ans, fam_)
        if "\\text" in ans2 or "degrees" in ans2 or "percent" in ans2:
            ans2 = ans2.split("\\")[0].split(" ")[0].strip()
        ans = ans2
    if style == "two_boxes":
        inter = r.choice(fam_["false"] if expected else fam_["true"] + fam_["false"])
        if inter == ans:
            inter = str(r.randint(2, 9))
        tail = (f"First we find the intermediate value \\(\\boxed{{{inter}}}\\), but that is not what the question asks. "
                f"Continuing, we apply the remaining condition.\n\n{paragraph(r, 'mistral', topic, 9)}\n\n"
                f"Hence the {topic} is \\(\\boxed{{{ans}}}\\).")
    else:
        tail = final(r, style, ans, fam_, topic)
    sep = "\n\n" if r.random() < 0.85 else "\n"
    return {"gold": fam_["gold"], "response": body + sep + tail, "expected": expected,
            "source": f"real_style:{style}:{fam_['kind']}"}


# ---------------------------------------------------------------------------------------------------------
# Bare answers
# ---------------------------------------------------------------------------------------------------------

BARE = ["dollar", "paren", "bold", "plain", "answer_colon_short", "boxed", "dollar_boxed", "display", "sentence",
        "answer_dollar"]


def bare_case(r, i):
    fam_ = pick_family(r)
    expected = r.random() < 0.5
    ans = r.choice(fam_["true"] if expected else fam_["false"])
    form = r.choice(BARE)
    resp = {
        "dollar": f"${ans}$", "paren": f"\\({ans}\\)", "bold": f"**{ans}**", "plain": ans,
        "answer_colon_short": f"The answer: {ans}", "boxed": f"\\boxed{{{ans}}}", "dollar_boxed": f"$\\boxed{{{ans}}}$",
        "display": f"\\[{ans}\\]", "sentence": f"The answer is ${ans}$.", "answer_dollar": f"Answer: ${ans}$",
    }[form]
    return {"gold": fam_["gold"], "response": resp, "expected": expected, "source": f"bare:{form}:{fam_['kind']}"}


# ---------------------------------------------------------------------------------------------------------
# Adversarial formats (hand-built templates, each expanded with random values)
# ---------------------------------------------------------------------------------------------------------


def adv_templates():
    T = []

    def add(f):
        T.append(f)
        return f

    @add
    def side_by_side_boxes(r):
        v = sorted(r.sample(range(1, 30), 3))
        gold = "\\{" + ", ".join(map(str, v)) + "\\}"
        ok = r.random() < 0.5
        w = v if ok else [v[0], v[1], v[2] + 1]
        if ok and r.random() < 0.5:
            w = w[::-1]
        boxes = ", ".join(f"\\boxed{{{x}}}" for x in w)
        joiner = r.choice([boxes, boxes.replace(", ", " "), " , ".join(f"\\boxed{{{x}}}" for x in w)])
        return gold, f"Checking each candidate, the values that work are {joiner}.", ok

    @add
    def box_then_minerva(r):
        g = r.randint(3, 99)
        inter = g + r.randint(2, 20)
        ok = r.random() < 0.5
        fin = g if ok else g + 1
        resp = (f"The sum of the first part is $\\boxed{{{inter}}}$. However, we must subtract the overlap of "
                f"${inter - g}$, which was counted twice.\n\n$$ {inter} - {inter - g} = {fin}$$\n\n"
                f"Final Answer: The final answer is {fin}")
        return str(g), resp, ok

    @add
    def case_headings(r):
        g = r.randint(3, 60)
        ok = r.random() < 0.5
        fin = g if ok else g + 2
        resp = (f"We split into cases.\n\n#### Case n=3:\nHere we get $3 \\cdot 4 = 12$ arrangements.\n\n"
                f"#### Case n=4:\nHere we get $4 \\cdot 5 = 20$ arrangements, but ${32 - fin if 32 > fin else 5}$ are invalid.\n\n"
                f"#### Conclusion\nAdding the valid cases, the answer is $\\boxed{{{fin}}}$.")
        return str(g), resp, ok

    @add
    def thousands_thin(r):
        n = r.randint(1_000_000, 9_999_999)
        gold = commas(n)
        ok = r.random() < 0.5
        v = n if ok else n + 1000
        form = r.choice([commas(v, ",\\,"), commas(v, "{,}"), commas(v, "\\,"), str(v), commas(v, ",\\!")])
        return gold, f"Multiplying, the total number of ways is $\\boxed{{{form}}}$.", ok

    @add
    def function_name(r):
        c = r.randint(1, 12)
        m = r.randint(2, 5)
        gold = r.choice([f"x + {c}", f"{m}x + {c}", f"x^2 + {c}"])
        ok = r.random() < 0.5
        val = gold if ok else gold.replace(f"+ {c}", f"- {c}")
        name = r.choice(["g(x)", "f(x)", "f^{-1}(x)", "p(x)"])
        return gold, f"Solving for the inverse and simplifying, we obtain\n\\[{name} = {val}.\\]\n\nSo $\\boxed{{{name} = {val}}}$.", ok

    @add
    def named_pair(r):
        a, b = r.sample(range(-9, 13), 2)
        gold = f"({a}, {b})"
        ok = r.random() < 0.5
        w = (a, b) if ok else (b, a)
        lhs = r.choice(["(a, b)", "(x, y)", "(m, n)"])
        return gold, f"Solving the system gives $a = {w[0]}$ and $b = {w[1]}$, i.e. $\\boxed{{{lhs} = ({w[0]}, {w[1]})}}$.", ok

    @add
    def unicode_plain(r):
        c = r.randint(0, 3)
        ok = r.random() < 0.5
        if c == 0:
            a, m = r.randint(1, 9), r.choice([2, 3, 5, 7])
            gold = f"{a} \\pm \\sqrt{{{m}}}"
            return gold, f"By the quadratic formula the roots are x = {a} ± √{m if ok else m + 1}", ok
        if c == 1:
            d = r.choice([2, 3, 4, 6])
            gold = f"\\frac{{\\pi}}{{{d}}}"
            return gold, f"The smallest positive angle is therefore θ = π/{d if ok else d * 2}.", ok
        if c == 2:
            n = r.randint(2, 90)
            gold = f"-{n}"
            return gold, f"So the minimum value is −{n if ok else n + 1}.", ok
        k, m = r.randint(2, 6), r.choice([2, 3, 5])
        gold = f"{k}\\sqrt{{{m}}}"
        return gold, f"The distance is {k}√{m if ok else {2: 3, 3: 5, 5: 6}[m]}.", ok

    @add
    def periodic_qualifier(r):
        d = r.choice([3, 4, 6])
        gold = f"\\frac{{\\pi}}{{{d}}} + k\\pi"
        ok = r.random() < 0.5
        per = "k\\pi" if ok else "2k\\pi"
        form = r.choice([
            f"$x = \\frac{{\\pi}}{{{d}}} + {per}$ for $k \\in \\mathbb{{Z}}$",
            f"x = π/{d} + {per.replace(PI, 'π')}, k ∈ ℤ",
            f"$\\boxed{{\\frac{{\\pi}}{{{d}}} + {per},\\ k \\in \\mathbb{{Z}}}}$",
        ])
        return gold, f"Since tangent has period $\\pi$, all solutions are {form}.", ok

    @add
    def matrix_entry_forms(r):
        a, b = r.choice([(1, 3), (2, 5), (3, 4), (1, 7), (5, 6)])
        c, d = r.randint(-9, 9), r.randint(2, 9)
        gold = f"\\begin{{pmatrix}} -\\frac{{{a}}}{{{b}}} & {c} \\\\ {d} & \\frac{{{a}}}{{{b}}} \\end{{pmatrix}}"
        ok = r.random() < 0.5
        e = f"{a}/{b}" if ok else f"{a}/{b + 1}"
        resp = (f"Computing the inverse entry by entry, we find\n\\[\n\\boxed{{\\begin{{pmatrix}} -{a}/{b} & {c} \\\\ {d} & "
                f"{e} \\end{{pmatrix}}}}\n\\]")
        return gold, resp, ok

    @add
    def last_number_in_fraction(r):
        n = r.randint(2, 7)
        m = r.choice([3, 5, 7, 11, 13])
        return str(n), (f"Applying the quadratic formula, $x = \\frac{{{2 * n - 1} \\pm \\sqrt{{{m}}}}}{{2}}$; taking the "
                        f"larger root, so $x = \\frac{{{2 * n - 1}+\\sqrt{{{m}}}}}{{2}}$"), False

    @add
    def wrappers(r):
        fam_ = r.choice([g_int, g_fraction, g_radical, g_text])(r)
        ok = r.random() < 0.5
        ans = r.choice(fam_["true"] if ok else fam_["false"])
        w = r.choice(["\\text{{{}}}", "\\mathrm{{{}}}", "\\textbf{{{}}}", "\\mathbf{{{}}}"])
        if ans.startswith(("\\text", "\\mathrm")):  # never wrap a wrapper
            ans = ans.split("{", 1)[1][:-1]
        if "\\" in ans and w.startswith("\\text"):
            w = "\\mathrm{{{}}}"
        inner = w.format(ans)
        return fam_["gold"], f"Hence the answer is $\\boxed{{{inner}}}$", ok

    @add
    def trailing_junk(r):
        fam_ = pick_family(r)
        ok = r.random() < 0.5
        ans = r.choice(fam_["true"] if ok else fam_["false"])
        resp = r.choice([f"**Final answer: ${ans}$.**", f"**The answer is ${ans}$**", f"\\[\\text{{Answer: }} {ans}\\]",
                         f"The answer is $\\boxed{{{ans}}}$.**", f"\\[\n\\boxed{{{ans}}}.\n\\]"])
        return fam_["gold"], "After simplifying all terms, we arrive at the result.\n\n" + resp, ok

    @add
    def gold_solution_boxed(r):
        fam_ = r.choice([g_int, g_fraction, g_radical, g_tuple, g_interval])(r)
        gsol = (f"We have $2 \\cdot 3 = 6$ and $6 + 1 = 7$. Applying the condition, we conclude that the answer is "
                f"$\\boxed{{{fam_['gold']}}}$.")
        ok = r.random() < 0.5
        ans = r.choice(fam_["true"] if ok else fam_["false"])
        return gsol, f"Working through the algebra, I get $\\boxed{{{ans}}}$.", ok

    @add
    def gold_solution_gsm(r):
        a, b, c = r.randint(3, 20), r.randint(2, 9), r.randint(1, 15)
        tot = a * b + c
        gsol = f"She earns {a} * {b} = <<{a}*{b}={a * b}>>{a * b} dollars.\nThen she gets {c} more, so {a * b} + {c} = <<{a * b}+{c}={tot}>>{tot}.\n#### {tot}"
        ok = r.random() < 0.5
        v = tot if ok else tot - c
        resp = r.choice([f"She earns ${a} \\times {b} = {a * b}$ dollars, plus ${c}$, so the total is ${v}$.\n\n#### {v}",
                         f"Total = {a * b} + {c} = {v}.\nThe answer is {v}.",
                         f"The total is $\\boxed{{{v}}}$ dollars."])
        if not ok:
            resp = resp.replace(f"{a * b} + {c} = {v}", f"{a * b} = {v}").replace(f"plus ${c}$, ", "")
        return gsol, resp, ok

    @add
    def trailing_bracket_percent(r):
        n = r.choice([15, 20, 25, 40, 60, 75])
        ok = r.random() < 0.5
        v = n if ok else n + 5
        return f"{n}\\%", r.choice([f"So the percentage increase is\n\\[{v}\\%\\]", f"The discount is **{v}%**.",
                                    f"which is $\\boxed{{{v}\\%}}$ of the total."]), ok

    @add
    def degree_unicode(r):
        n = r.choice([30, 45, 60, 72, 108, 120])
        ok = r.random() < 0.5
        v = n if ok else n + 15
        return f"{n}^\\circ", r.choice([f"Therefore ∠ABC = {v}°.", f"so the angle measures $\\boxed{{{v}^{{\\circ}}}}$.",
                                        f"Answer: {v} degrees"]), ok

    @add
    def minus_signs(r):
        a, b = r.randint(1, 9), r.randint(2, 9)
        gold = f"-\\frac{{{a}}}{{{b}}}" if math.gcd(a, b) == 1 else f"-{a}"
        ok = r.random() < 0.5
        if gold.startswith("-\\frac"):
            ans = r.choice([f"\\frac{{-{a}}}{{{b}}}", f"-{a}/{b}", f"−{a}/{b}"]) if ok else f"{a}/{b}"
        else:
            ans = r.choice([f"−{a}", f"- {a}"]) if ok else f"{a}"
        return gold, f"The slope of the line is {ans}.", ok

    @add
    def choice_letter_prose(r):
        L = r.choice("ABCDE")
        o = r.choice([x for x in "ABCDE" if x != L])
        ok = r.random() < 0.5
        x = L if ok else o
        gold = r.choice([f"\\text{{({L})}}", f"({L})", f"\\textbf{{({L})}}"])
        resp = r.choice([f"Comparing with the options, the correct choice is **({x})**.",
                         f"The answer is $\\boxed{{\\textbf{{({x})}}\\ {r.randint(2, 40)}}}$",
                         f"Thus the correct option is \\boxed{{{x}}}."])
        return gold, resp, ok

    @add
    def roots_or(r):
        a, b = r.sample(range(-9, 10), 2)
        gold = f"{min(a, b)}, {max(a, b)}"
        ok = r.random() < 0.5
        u, v = (a, b) if ok else (a, b + 1 if b + 1 != a else b + 2)
        return gold, r.choice([f"So $x = {u}$ or $x = {v}$.", f"The solutions are $x = {u}$ and $x = {v}$.",
                               f"Therefore $\\boxed{{x = {u} \\text{{ or }} x = {v}}}$"]), ok

    @add
    def base_subscript_text(r):
        n = r.randint(5, 60)
        s = bin(n)[2:]
        ok = r.random() < 0.5
        t = s if ok else bin(n + 1)[2:]
        return f"{s}_2", r.choice([f"In base 2 the number is $\\boxed{{{t}_2}}$.", f"So the answer is ${t}_{{2}}$.",
                                   f"The base-2 representation is $\\boxed{{{t}_{{\\text{{two}}}}}}$."]), ok

    @add
    def sqrt_unicode_frac(r):
        m, d = r.choice([2, 3, 5]), r.choice([2, 3, 4])
        gold = f"\\frac{{\\sqrt{{{m}}}}}{{{d}}}"
        ok = r.random() < 0.5
        return gold, f"So the ratio equals √{m}/{d if ok else d + 1}.", ok

    return T


def adversarial_case(r, i, T):
    f = T[i % len(T)]
    gold, resp, ok = f(r)
    return {"gold": gold, "response": resp, "expected": bool(ok), "source": f"adversarial:{f.__name__}"}


# ---------------------------------------------------------------------------------------------------------


def write(name, rows):
    path = os.path.join(HERE, name)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} cases ({sum(r['expected'] for r in rows)} true)")


def main():
    r = random.Random(20240611)
    write("real_style.jsonl", [real_style_case(r, i) for i in range(1000)])
    r = random.Random(7)
    write("bare_answers.jsonl", [bare_case(r, i) for i in range(600)])
    r = random.Random(1234)
    T = adv_templates()
    write("adversarial_formats.jsonl", [adversarial_case(r, i, T) for i in range(len(T) * 25)])


if __name__ == "__main__":
    main()
