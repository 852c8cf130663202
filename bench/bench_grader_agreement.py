"""Differential test of mcprm's grader against Math-Verify on case files, with the speed ratio.

    python bench/bench_grader_agreement.py [CASES.jsonl | DIR ...] [--show-disagreements] [--out FILE]

Each case file is JSON Lines with ``gold``, ``response`` and ``expected`` (true/false: the right verdict).
Default: the case sets in ``bench/grader_cases/``. For each file it prints how often each grader agrees with
``expected`` (mcprm ``sympy`` grader; Math-Verify 0.8.0 defaults, ``verify(parse(gold), parse(response))``
through ``graders/mathverify.py``, which wraps a bare gold in ``$...$`` as Math-Verify's documentation does),
and both graders' wall time over the whole file in the same run. A verdict of None (ungradable) counts as
"not equal" for agreement, as a label run would not count it as a success; the ``strict`` column counts a
None as a miss also where the expected verdict is false (a wrong answer must be False, not an abstention),
and ``None`` is how many of mcprm's verdicts were None. A case may carry a ``problem`` (the problem text),
passed to graders that take it.
Every disagreement (with expected, or between the graders) is written to ``--out`` for triage.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from graders import GraderConfig, get_grader, grade_batch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                row = json.loads(line)
                row.setdefault("source", f"{os.path.basename(path)}:{n}")
                rows.append(row)
    return rows


def run(grader_name: str, rows: list[dict]) -> tuple[list, float]:
    get_grader(grader_name)  # math-verify registers itself here (or says it is not installed)
    t0 = time.perf_counter()
    pairs = [(str(r["gold"]), r["response"]) for r in rows]
    # the problem text, where a case has one, decides policies (for the graders registered as reading it)
    vs = grade_batch(pairs, GraderConfig(), grader_name, problems=[r.get("problem") for r in rows])
    return vs, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=[os.path.join(HERE, "grader_cases")])
    ap.add_argument("--show-disagreements", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "grader_disagreements.jsonl"))
    args = ap.parse_args(argv)
    files = []
    for p in args.paths:
        files += sorted(glob.glob(os.path.join(p, "*.jsonl"))) if os.path.isdir(p) else [p]
    try:
        get_grader("math-verify")
        others = ["math-verify"]
    except ImportError as e:
        print(f"note: {e}; showing mcprm only", file=sys.stderr)
        others = []
    get_grader("sympy").grade_batch([("1", r"\boxed{\sqrt{1}}")], GraderConfig())  # start the workers
    header = (
        f"{'case set':34s} {'n':>5s} {'mcprm':>7s} {'strict':>7s} {'None':>5s} {'math-verify':>12s} "
        f"{'mcprm s':>8s} {'mv s':>8s} {'speed':>6s}"
    )
    print(header)
    print("-" * len(header))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tot = {"n": 0, "m": 0, "v": 0, "s": 0, "none": 0, "tm": 0.0, "tv": 0.0}
    with open(args.out, "w", encoding="utf-8") as out:
        for path in files:
            rows = load(path)
            if not rows:
                continue
            mv, tm = run("sympy", rows)
            vv, tv = run(others[0], rows) if others else ([None] * len(rows), 0.0)
            m_ok = v_ok = s_ok = n_none = 0
            for r, a, b in zip(rows, mv, vv, strict=True):
                exp = bool(r["expected"])
                ma = a.correct is True
                va = b is not None and b.correct is True
                m_ok += ma == exp
                v_ok += va == exp
                s_ok += a.correct is exp
                n_none += a.correct is None
                if ma != exp or (b is not None and va != exp):
                    rec = {
                        "set": os.path.basename(path), "expected": exp, "mcprm": a.correct,
                        "mcprm_reason": a.reason, "mcprm_extracted": a.extracted,
                        "math_verify": None if b is None else b.correct, "gold": r["gold"],
                        "response": r["response"], "source": r.get("source"),
                    }  # fmt: skip
                    out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    if args.show_disagreements and ma != exp:
                        print(f"  MISS exp={exp} mv={rec['math_verify']} {a.reason!r} ex={a.extracted!r:.60}"
                              f" gold={str(r['gold'])[:60]!r} resp={r['response'][-100:]!r}")
            n = len(rows)
            tot["n"] += n
            tot["m"] += m_ok
            tot["v"] += v_ok
            tot["tm"] += tm
            tot["tv"] += tv
            tot["s"] += s_ok
            tot["none"] += n_none
            speed = f"{tv / tm:5.1f}x" if others and tm > 0 else "-"
            mvs = f"{v_ok / n:11.1%}" if others else "-"
            print(
                f"{os.path.basename(path):34s} {n:5d} {m_ok / n:7.1%} {s_ok / n:7.1%} {n_none:5d} {mvs:>12s} "
                f"{tm:8.2f} {tv:8.2f} {speed:>6s}"
            )
    print("-" * len(header))
    n = max(tot["n"], 1)
    speed = f"{tot['tv'] / tot['tm']:5.1f}x" if others and tot["tm"] > 0 else "-"
    print(
        f"{'all':34s} {tot['n']:5d} {tot['m'] / n:7.1%} {tot['s'] / n:7.1%} {tot['none']:5d} "
        f"{tot['v'] / n:11.1%}  {tot['tm']:8.2f} {tot['tv']:8.2f} {speed:>6s}"
    )
    print(f"disagreements: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
