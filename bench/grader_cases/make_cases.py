"""Generate differential test cases for the math answer grader (stdlib only, deterministic).

    python bench/grader_cases/make_cases.py

Writes three JSON Lines files next to this script; each line is
``{"gold": str, "response": str, "expected": bool, "source": "<generator>:<form>"}``.

* ``real_style.jsonl``         full chain-of-thought responses in the styles of Qwen2.5 / Llama / DeepSeek /
                               Mistral / Minerva, with many final-answer styles (and truncated ones).
* ``bare_answers.jsonl``       responses that are only the answer in some markup.
* ``adversarial_formats.jsonl`` tricky formats whose verdict is still clear to a human.

The gold answers come from :mod:`families`. The verdict is known by construction: a ``true`` case ends with an answer that is the gold answer or an
equivalent rewriting of it; a ``false`` case ends with a clearly different value of the same shape, or has
no final answer at all (truncated).
"""

from __future__ import annotations

import json
import math
import os
import random

from families import commas, g_fraction, g_int, g_interval, g_radical, g_text, g_tuple, pick_family  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CDOT, PI, AREA = "\\cdot", "\\pi", "A = \\frac{1}{2}bh"


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
