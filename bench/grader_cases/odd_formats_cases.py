"""Writes ``odd_formats.jsonl``: hand-verdicted cases for odd answer formats and the grader's wording policies.

    python bench/grader_cases/odd_formats_cases.py

Each answer form (with the gold and the hand verdict) is written inside two of seven response styles seen in
real model output (Qwen/DeepSeek boxes, Llama's "The final answer is: $\\boxed{}$", Minerva's "Final Answer:
The final answer is $X$. I hope it is correct.", markdown bold answers, a think block, GSM8K's ``####``), so
the same answer is read in more than one surrounding. Rows with a ``problem`` exercise the wording policies;
whole responses (``whole``) are written out as they are. Categories: ``wrong`` (a readable answer that is not
the gold: must be False, never None), ``format`` (unreadable but common forms), ``thousands``, ``several``
(several answers), ``policy``, ``extraction`` (which answer of a response is the final one).
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

STYLES = [
    lambda x: f"Let me work through this carefully.\n\nAfter simplifying, we obtain the result.\n\nTherefore, the final answer is $\\boxed{{{x}}}$.",
    lambda x: f"## Step 1: Understand the problem\nWe set up the equation.\n\n## Step 2: Solve\nSolving gives the value.\n\nThe final answer is: $\\boxed{{{x}}}$",
    lambda x: f"We compute each part and combine them.\n\n**Final Answer**\n\\[\n\\boxed{{{x}}}\n\\]",
    lambda x: f"Putting the pieces together, we get the value below.\nFinal Answer: The final answer is ${x}$. I hope it is correct.",
    lambda x: f"<think>\nOkay, so I need to find the value. Let me compute step by step.\n</think>\n\nCombining the results:\n\n**Answer:** {x}",
    lambda x: f"First we find the rate, then the total.\nSo the total comes out as computed.\n#### {x}",
    lambda x: f"Solution:\n1. Set up the equation.\n2. Solve it.\n\nThe answer is $\\boxed{{{x}}}$.",
]

# (category, gold, answer as written, hand verdict)
FORMS = [
    # unreadable but common formats, right and wrong
    ("format", "42", r"\42", True),
    ("wrong", "42", r"\43", False),
    ("format", "3", r"3^{\text{rd}}", True),
    ("wrong", "3", r"4^{\text{th}}", False),
    ("format", "21", r"21^{st}", True),
    ("format", "12", r"\foo{12}", True),
    ("wrong", "12", r"\foo{13}", False),
    ("format", "16", r"\color{red}{16}", True),
    ("wrong", "16", r"\textcolor{blue}{15}", False),
    ("format", r"\frac{1}{4}", r"\nicefrac{1}{4}", True),
    ("wrong", r"\frac{1}{4}", r"\sfrac{1}{3}", False),
    ("format", "16", r"\bf 16", True),
    ("format", "16", r"\mathbf16", True),
    ("format", "16", r"= 16", True),
    ("wrong", "16", r"\approx 17", False),
    ("format", r"\frac{1}{3}", r"0.\overline{3}", True),
    ("wrong", r"\frac{1}{3}", r"0.\overline{6}", False),
    ("format", r"\frac{1}{3}", r"33.3\%", True),
    ("format", "6", r"\text{six}", True),
    ("wrong", "6", r"\text{seven}", False),
    ("format", "24", r"24\,\mathrm{cm}^2", True),
    ("wrong", "24", r"25\,\mathrm{m}", False),
    ("format", r"\frac{1}{2}", r"\\frac{1}{2}", True),
    ("wrong", r"\frac{1}{2}", r"\\frac{1}{3}", False),
    ("format", "27", "**27**", True),
    ("wrong", "27", "**28**", False),
    ("format", "8", r"\underbrace{2^3}_{8}", True),
    ("format", "7", r"\text{The answer is } 7", True),
    ("wrong", "7", r"\text{The answer is } 9", False),
    ("format", "12", "Tom has 12 apples", True),
    ("wrong", "12", "Tom has 13 apples", False),
    ("format", "7", "(B) 7", True),
    ("wrong", "7", "(B) 8", False),
    ("format", "B", "(B) 7", True),
    ("wrong", "C", "(B) 7", False),
    ("format", "6", r"\text{Total} = 2 \times 3 = 6", True),
    ("wrong", "6", r"\text{Total} = 2 \times 4 = 8", False),
    ("format", r"\frac{3}{2}", r"\dfrac32", True),
    ("format", "5", r"\mathbb{5}", True),
    ("wrong", "10", r"\text{eleven}", False),
    ("wrong", "x^2+1", r"x^2+2", False),
    ("wrong", r"2\sqrt{3}", r"3\sqrt{2}", False),
    ("wrong", r"\pi", r"2\pi", False),
    ("wrong", "Monday", r"\text{Tuesday}", False),
    ("wrong", r"(2, 3)", r"(3, 2)", False),
    ("wrong", r"y = 2x + 1", r"y = 2x + 3", False),
    # thousands
    ("thousands", "4500", r"4,\!500", True),
    ("thousands", r"4,\!500", "4500", True),
    ("thousands", "4500", r"\$4,\!500.00", True),
    ("thousands", "4500", r"4{,}500", True),
    ("thousands", "4500", r"4\,500", True),
    ("wrong", "4500", r"4,\!600", False),
    ("thousands", "1234567", r"1,\!234,\!567", True),
    ("wrong", "1234567", r"1,\!234,\!576", False),
    # several answers
    ("several", "5, 2", "p=5, q=2", True),
    ("wrong", "5, 2", "p=5, q=3", False),
    ("several", "$5$, $2$", "5, 2", True),
    ("several", r"-2, 3", r"x = -2 \text{ or } x = 3", True),
    ("wrong", r"-2, 3", r"x = -2 \text{ or } x = 4", False),
    ("several", r"\pm 2", r"x=2 \text{ or } x=-2", True),
    ("several", r"(1, 2), (2, 1)", r"(x, y) = (1, 2) \text{ and } (2, 1)", True),
    ("wrong", r"(1, 2), (2, 1)", r"(x, y) = (1, 2)", False),
    # more wrong answers, each in a form that is read correctly elsewhere in this file
    ("wrong", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix} 2 \\ 1 \end{pmatrix}", False),
    ("wrong", r"[2, 5)", r"[2, 5]", False),
    ("wrong", r"(-\infty, 3)", r"x > 3", False),
    ("wrong", r"\frac{\sqrt{3}}{2}", r"\frac{\sqrt{2}}{2}", False),
    ("wrong", r"25\%", "0.3", False),
    ("wrong", "18.90", r"\$18.99", False),
    ("wrong", "120", r"150^\circ", False),
    ("wrong", r"\text{east}", r"\text{west}", False),
    ("wrong", "3", r"3.5", False),
    ("wrong", r"\frac{5}{36}", r"\frac{5}{36} + 1", False),
    ("wrong", "-1", "1", False),
    ("wrong", r"x^2 - 4", r"(x-2)^2", False),
    ("wrong", "12", r"12x", False),
    ("wrong", "2", r"\sqrt{2}", False),
    # more readable forms
    ("format", "18.90", r"\$18.90", True),
    ("format", "120", r"120^\circ", True),
    ("format", r"x^2 - 4", r"(x-2)(x+2)", True),
    ("format", r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", True),
    ("format", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix} 1 \\\\ 2 \end{pmatrix}", True),
    ("format", r"(-\infty, 3)", r"x < 3", True),
    ("format", r"25\%", "0.25", True),
    ("format", "9", r"\boxed{9}", True),
    ("format", "9", r"{{9}}", True),
    ("format", "10", r"\textbf{10}", True),
    ("format", r"\frac{1}{2}", r"\left.\frac{1}{2}\right.", True),
    ("format", "2", r"\2", True),
    ("format", "5", r"5^{\rm th}", True),
    ("format", "100", r"\text{one hundred}", True),
]

WHOLE = [
    # (category, gold, response, verdict[, problem])
    ("extraction", "4", "The value of $x$ is 4. To verify: $3(4) + 2 = 14$, which matches the equation.", True),
    ("extraction", "4", "So $x = 4$.\n\nCheck: $3 \\cdot 4 + 2 = 14$ ✓", True),
    ("wrong", "4", "So $x = 5$.\n\nCheck: $3 \\cdot 5 + 2 = 17$ ✓", False),
    ("extraction", "5", "Since $n^2 = 25$, we have $n = \\pm 5$, and since $n>0$, $n = 5$.", True),
    ("extraction", "24", "So the area of the rectangle is 24 cm².", True),
    ("several", "2, 3", "Part (a): the smaller root is $\\boxed{2}$.\n\nPart (b): the larger root is $\\boxed{3}$.", True),
    ("several", "a=2, b=3", "(a) We find $a = \\boxed{2}$.\n(b) Then $b = \\boxed{3}$.", True),
    ("wrong", "a=2, b=3", "(a) We find $a = \\boxed{2}$.\n(b) Then $b = \\boxed{4}$.", False),
    ("wrong", "2", "The roots are $\\boxed{2}$ and $\\boxed{3}$.", False),
    ("several", "1000, 2000", "The two prices are $1,\\!000$ and $2,\\!000$ dollars. The answer is $1,\\!000$ and $2,\\!000$.", True),
    ("format", "12", "Therefore the answer is $\\boxed{12$.", True),
    ("wrong", "12", "Therefore the answer is $\\boxed{13$.", False),
    ("format", "\\frac{1}{2}", "The answer is \\boxed{\\frac{1}{2}", True),
    ("format", "12", "The answer is $12$$", True),
    ("format", "12", "\\boxed{12}}", True),
    ("wrong", "6", "So the answer is $\\boxed{6}$ ways.\n\nHowever, I realize I made an error. The correct count is $\\boxed{8}$.", False),
    ("format", "27", "The answer is **27**.", True),
    ("wrong", "27", "The answer is **26**.", False),
    ("wrong", "4", "The answer is somewhere between 3 and 5 apples.", False),
    ("wrong", "(2, 4)", "   - For the interval \\((4, \\infty)\\), choose \\(x = 5\\):\n     \\[\n     (5 - 4)(5 -", False),
    # issue-tracker style: two close values, sequences, times, angles, parameters
    ("wrong", "$\\frac{1}{1998!}$", "So the probability is $\\boxed{\\frac{1}{2000!}}$.", False),
    ("wrong", "$17, 44, \\text{ and } 90$", "The three numbers are $\\boxed{17, 45, \\text{ and } 90}$.", False),
    ("several", "$17, 44, \\text{ and } 90$", "The three numbers are $17, 44,$ and $90$. The answer is $17, 44, and 90$.", True),
    ("wrong", "$11:00$", "The train arrives at $\\boxed{1:00}$.", False),
    ("format", "$11:00$", "The train arrives at $\\boxed{11:00}$.", True),
    ("wrong", "$1, 4, \\ldots, 3n-2$", "The terms are $\\boxed{1, 3, \\ldots, 2n-1}$.", False),
    ("format", "$1, 4, \\ldots, 3n-2$", "The terms are $\\boxed{1, 4, \\ldots, 3n-2}$.", True),
    ("format", "$\\sqrt{1/m}$", "Simplifying, $\\boxed{\\frac{1}{\\sqrt{m}}}$.", True),
    ("wrong", "$\\sqrt{1/m}$", "Simplifying, $\\boxed{\\frac{1}{m}}$.", False),
    ("format", "$60^\\circ$", "The angle is $\\boxed{\\frac{\\pi}{3}}$.", True),
    ("wrong", "$60^\\circ$", "The angle is $\\boxed{\\frac{\\pi}{6}}$.", False),
    ("format", "$\\frac{3\\pi}{4}$", "The angle is $\\boxed{135^\\circ}$.", True),
    ("format", "$\\frac{\\pi}{3} + k\\pi$", "So $x = \\frac{\\pi}{3} + n\\pi$ for any integer $n$.", True),
    ("wrong", "$\\frac{\\pi}{3} + k\\pi$", "So $x = \\frac{\\pi}{3} + 2n\\pi$ for any integer $n$.", False),
    ("format", "58", "Thus the count is **58**.\n\n---\n\n✅ Final Answer: **58**", True),
    ("extraction", "21", "We first get \\boxed{21}. On reflection the answer is \\boxed{23", False),
    ("extraction", "23", "We first get \\boxed{21}. On reflection the answer is \\boxed{23", True),
    ("extraction", "21", "We first get \\boxed{21}. On reflection the answer is \\boxed{\\frac{4", False),
    ("format", "5", "The answer is $\\boxed{5 \\text{ for all } x > 0}$", True),
    ("wrong", "5", "The answer is $\\boxed{6 \\text{ where } n \\ge 1}$", False),
    ("format", "720", "So the number of orderings is $6! = 720$.", True),
    ("wrong", "720", "So the number of orderings is $5! = 120$.", False),
    ("format", "311", "Answer: p+q = 300+11 = 311", True),
    ("format", "11111111100", "is $\\boxed{11,\\! 111,\\! 111,\\! 100}$", True),
    ("wrong", "(5, 2)", "The point is $\\boxed{\\{2, 5\\}}$.", False),
    ("policy", "(2, 5)", "The roots are $\\boxed{\\{2, 5\\}}$.", True),
    ("format", "(-\\infty, \\infty)", "The domain is all real numbers.", True),
    ("format", "\\emptyset", "The answer is $\\boxed{\\varnothing}$.", True),
    ("format", "\\text{no solution}", "Subtracting the equations gives $0 = 5$, so the system has no solution.", True),
    ("format", "\\langle 2, -1 \\rangle", "The vector is $\\boxed{(2, -1)}$.", True),
    ("format", "C", "The answer is $\\boxed{\\textbf{(C) } 12}$", True),
    ("wrong", "C", "The answer is $\\boxed{\\textbf{(D) } 12}$", False),
    ("format", "\\text{odd}", "Since $f(-x) = -f(x)$, the function $f(x) = x^3 - x$ is odd.", True),
    ("wrong", "\\text{odd}", "Since $f(-x) = f(x)$, the function is even.", False),
    ("format", "\\text{neither}", "Neither identity holds, so $f$ is neither even nor odd.", True),
    ("wrong", "\\text{Wednesday}", "Counting forward 10 days, the day is on Thursday.", False),
    ("extraction", "5", "The answer is 5, since 2 \\times 4 = 8 is too big.", True),
    ("extraction", "6", "The answer is x = 6 because 2x = 12.", True),
    ("extraction", "15", "The answer is 15 apples, which is 3 times 5.", True),
    ("wrong", "8", "The answer is 15 apples, which is 3 times 5 and not 8.", False),
    ("extraction", "20", "Final answer: 20 (since 4 * 5 = 20)", True),
    ("format", "\\frac{3}{4}", "So the tank is ¾ full.", True),
    ("format", "2.5", "The recipe needs 2½ cups.", True),
    ("format", "(4, -1)", "Solving, we get $x = 4, y = -1$.", True),
    ("wrong", "(4, -1)", "Solving, we get $x = -1, y = 4$.", False),
    ("format", "\\frac{2}{3}", "The answer is two thirds.", True),
    ("wrong", "\\frac{2}{3}", "The answer is three quarters.", False),
    ("extraction", "7", "所以答案是7。", True),
    ("wrong", "7", "所以答案是8。", False),
    ("extraction", "15", "最终答案：**15**", True),
    ("extraction", "6", "所以，x的值为6", True),
    ("extraction", "9", "La respuesta es 9.", True),
    # policies decided by the problem's wording
    ("policy", "(3, 5)", "The solutions are $\\boxed{\\{3, 5\\}}$.", True,
     "Find all real $x$ such that $x^2 - 8x + 15 = 0$."),
    ("policy", "(3, 5)", "The pair is $\\boxed{\\{3, 5\\}}$.", False,
     "Find the ordered pair $(a, b)$ of integers with $a < b$, $a + b = 8$ and $ab = 15$."),
    ("policy", "(3, 5)", "$\\boxed{(5, 3)}$", False, "Find the ordered pair $(a, b)$ with $a<b$, $a + b = 8$, $ab = 15$."),
    ("policy", "(3, 5)", "$\\boxed{(5, 3)}$", True, "Give the two roots of $x^2 - 8x + 15$, in any order, as a pair."),
    ("policy", "\\{3, 5\\}", "The solution set is $\\boxed{(3, 5)}$", True, None),
    ("policy", "(0, 1)", "The answer is $0 < x < 1$.", True, "Solve $x^2 < x$. Give your answer in interval notation."),
    ("policy", "(0, 1)", "The answer is $0 < x \\le 1$.", False, "Solve the inequality; give an interval."),
    ("policy", "f(x) = 2x", "The function is $f(t) = 2t$.", True, "Find the function $f$."),
    ("policy", "f(x) = 2x", "The function is $f(t) = 3t$.", False, "Find the function $f$."),
]


def main() -> None:
    rows = []
    for n, (cat, gold, ans, ok) in enumerate(FORMS):
        for k in (n % len(STYLES), (n + 3) % len(STYLES)):
            rows.append({"gold": gold, "response": STYLES[k](ans), "expected": ok, "source": f"odd:{cat}:{n}:{k}"})
    for n, (cat, gold, resp, ok, *problem) in enumerate(WHOLE):
        row = {"gold": gold, "response": resp, "expected": ok, "source": f"odd:{cat}:whole{n}"}
        if problem and problem[0] is not None:
            row["problem"] = problem[0]
        rows.append(row)
    with open(os.path.join(HERE, "odd_formats.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} cases")


if __name__ == "__main__":
    main()
