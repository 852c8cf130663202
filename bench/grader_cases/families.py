"""The gold-answer families of the grader's differential cases (:mod:`make_cases`): each generator draws a gold
answer with its equivalent rewritings (``true``) and clearly different values of the same shape (``false``)."""

from __future__ import annotations

import math
from fractions import Fraction

LE, GE = "\\le", "\\ge"
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
