"""Is the bundled model (data/model) an honest imperfect reasoner? Three properties, per number of operations.

1. Accuracy: share of fresh problems (not training, not the bundled sample) whose solution sampled at
   temperature 1.0 reaches the gold answer (graded by ``graders.grade``).
2. Where errors fall: histogram of the first wrong step (exact checker) among the solutions that have one.
3. Prefix values: K continuations sampled at T=1.0 from each operation-step prefix of those solutions
   (``prompt + steps[:i+1]``); success rate of continuations from prefixes that are still correct vs from
   prefixes that already contain an error (the signal Math-Shepherd labels rely on).

    python3 bench/bench_bundled_model.py                # 300 problems, K=4 on 120 solutions (~5-10 min, 2 cores)
    python3 bench/bench_bundled_model.py --quick        # 60 problems, K=4 on 30 solutions
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graders import grade  # noqa: E402
from pipeline.bundled.generator import generate_problems  # noqa: E402
from pipeline.bundled.synthetic import check_steps, prefix_prompt, split_completion  # noqa: E402

BENCH_SEED = 31_337  # disjoint from training (>= 900_000) and the bundled sample (20_250)


def sample(torch, model, tok, prompts: list[str], seed: int, batch_size: int = 128) -> list[str]:
    """One completion per prompt at T=1.0 (left-padded batches, reproducible for a given seed)."""
    torch.manual_seed(seed)
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        enc = tok(
            prompts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
        )
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                max_new_tokens=256,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        texts += tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return texts


def rate(a: int, b: int) -> str:
    return f"{a / b:.2f} ({a}/{b})" if b else "-"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=REPO / "data" / "model")
    ap.add_argument("--n", type=int, default=300, help="fresh problems for properties 1 and 2")
    ap.add_argument("--k", type=int, default=4, help="continuations per prefix (property 3)")
    ap.add_argument(
        "--prefix-solutions", type=int, default=120, help="solutions whose prefixes are rolled out"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.k, args.prefix_solutions = 60, 4, 30

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    rows = generate_problems(args.n, seed=BENCH_SEED + args.seed, difficulty="medium")

    t0 = time.time()
    texts = sample(torch, model, tok, [prefix_prompt(r["problem"], [], -1) for r in rows], seed=args.seed)
    t_solve = time.time() - t0
    sols = []
    for r, text in zip(rows, texts, strict=True):
        steps = split_completion(text)
        sols.append((r, steps, grade(r["answer"], text).correct is True, check_steps(r["problem"], steps)))

    # 1 + 2: accuracy and first-error positions per number of operations.
    acc = defaultdict(lambda: [0, 0])
    first = defaultdict(Counter)
    where = Counter()
    for r, _steps, ok, chk in sols:
        acc[r["n_steps"]][0] += ok
        acc[r["n_steps"]][1] += 1
        if chk.first_error >= 0:
            first[r["n_steps"]][chk.first_error] += 1
            last = r["n_steps"]  # index of the answer line
            kind = (
                "first step"
                if chk.first_error == 0
                else "answer line"
                if chk.first_error >= last
                else "middle"
            )
            where[kind] += 1
    n_all = len(sols)
    n_ok = sum(ok for _, _, ok, _ in sols)
    print(
        f"model {args.model}  problems {n_all} (seed {BENCH_SEED + args.seed})  T=1.0  ({t_solve:.1f}s to sample)"
    )
    print(
        "\n1+2. accuracy (gold answer reached) and first wrong step (exact checker), by number of operations"
    )
    print(f"{'ops':>4} | {'accuracy':>16} | first error at step index 0 1 2 ... (answer line = index ops)")
    for n in sorted(acc):
        hist = " ".join(str(first[n].get(i, 0)) for i in range(n + 1))
        print(f"{n:>4} | {rate(*acc[n]):>16} | {hist}")
    print(f" all | {rate(n_ok, n_all):>16} | first errors: {dict(where)}")
    consistent = sum((chk.complete == ok) for _, _, ok, chk in sols)
    print(f"checker 'complete' agrees with the grader on {consistent}/{n_all} solutions")

    # 3: continuations from correct vs erroneous prefixes.
    with_err = [s for s in sols if s[3].first_error >= 0]
    without = [s for s in sols if s[3].first_error < 0]
    half = args.prefix_solutions // 2
    chosen = with_err[:half] + without[: args.prefix_solutions - min(half, len(with_err))]
    prompts, meta = [], []
    for r, steps, _, chk in chosen:
        n_ops_written = max(0, len(steps) - 1) if steps and steps[-1].startswith("The answer") else len(steps)
        for i in range(n_ops_written):  # prefixes ending at an operation step (not the answer line)
            bad = 0 <= chk.first_error <= i
            prompts += [prefix_prompt(r["problem"], steps, i)] * args.k
            meta += [(r, bad)] * args.k
    t0 = time.time()
    conts = sample(torch, model, tok, prompts, seed=args.seed + 1)
    t_cont = time.time() - t0
    res = defaultdict(lambda: [0, 0, 0, 0])  # n_ops -> good_ok, good_n, bad_ok, bad_n
    for (r, bad), text in zip(meta, conts, strict=True):
        ok = grade(r["answer"], text).correct is True
        cell = res[r["n_steps"]]
        cell[2 * bad] += ok
        cell[2 * bad + 1] += 1
    print(
        f"\n3. continuation success from operation-step prefixes, K={args.k}, {len(chosen)} solutions "
        f"({len(prompts)} continuations, {t_cont:.1f}s, {len(prompts) / max(t_cont, 1e-9):.0f}/s)"
    )
    print(f"{'ops':>4} | {'from correct prefix':>20} | {'from prefix with an error':>26}")
    tot = [0, 0, 0, 0]
    for n in sorted(res):
        c = res[n]
        tot = [a + b for a, b in zip(tot, c, strict=True)]
        print(f"{n:>4} | {rate(c[0], c[1]):>20} | {rate(c[2], c[3]):>26}")
    print(f" all | {rate(tot[0], tot[1]):>20} | {rate(tot[2], tot[3]):>26}")


if __name__ == "__main__":
    main()
