"""Write the bundled sample: ``data/problems.jsonl`` and ``data/sample.jsonl``.

    python3 data/make_sample.py --seed 0

``problems.jsonl``: 300 fresh synthetic problems (``id``, ``problem``, ``answer``), drawn with a seed range
disjoint from the training problems of ``data/train_model.py``. ``sample.jsonl``: for each of them one
solution sampled from the bundled model (``data/model``) at temperature 1.0 on CPU, with ``steps`` (the lines
of the generated text) and ``reference_first_error`` (the exact checker's first wrong step, -1 if none; a
solution that stops before its answer line has ``reference_first_error == -1`` but no answer).
Deterministic for a given seed, model and torch build.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.bundled.generator import generate_problems  # noqa: E402
from pipeline.bundled.synthetic import check_steps  # noqa: E402

PROBLEMS_SEED = 20_250  # training uses seeds >= 900_000, the benchmark 31_337


def sample_solutions(model_dir, rows: list[dict], seed: int, temperature: float = 1.0, batch_size: int = 100):
    """One sampled solution (list of steps) per row, from the model in ``model_dir`` (CPU)."""
    from rollouts.base import require

    torch = require("torch", "pip install torch --index-url https://download.pytorch.org/whl/cpu")
    transformers = require("transformers", "pip install transformers")
    from pipeline.bundled.synthetic import PROMPT_TEMPLATE, split_completion

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(seed)
    out: list[list[str]] = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        prompts = [PROMPT_TEMPLATE.format(problem=r["problem"]) for r in chunk]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_p=1.0,
                max_new_tokens=256,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        texts = tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        out.extend(split_completion(t) for t in texts)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--model", type=Path, default=Path(__file__).resolve().parent / "model")
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(2)
    rows = generate_problems(args.n, seed=PROBLEMS_SEED + args.seed, difficulty="medium")
    t0 = time.time()
    solutions = sample_solutions(args.model, rows, seed=args.seed)
    elapsed = time.time() - t0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / "problems.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "problem": r["problem"], "answer": r["answer"]}) + "\n")
    n_ok = 0
    with open(args.out_dir / "sample.jsonl", "w") as f:
        for r, steps in zip(rows, solutions, strict=True):
            check = check_steps(r["problem"], steps)
            n_ok += check.complete
            row = {"id": r["id"], "problem": r["problem"], "answer": r["answer"], "steps": steps}
            row["reference_first_error"] = check.first_error
            f.write(json.dumps(row) + "\n")
    print(
        f"wrote {len(rows)} problems and solutions to {args.out_dir} "
        f"({n_ok} fully correct by the checker; sampling took {elapsed:.1f}s)"
    )


if __name__ == "__main__":
    main()
