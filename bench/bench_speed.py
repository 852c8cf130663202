"""Speeds the tests used to assert and no longer do (tests check behaviour; a loaded machine is not a bug).

    python3 bench/bench_speed.py

1. Streaming input: time to the first 3 solutions of a 200,000-row JSONL file, and the whole pass.
2. The bundled model: greedy generation of one solution for a fresh problem (after a warm-up).
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def bench_ingest(n: int = 200_000) -> None:
    from pipeline.input import InputSpec, iter_solutions

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "big.jsonl"
        with open(p, "w") as f:
            for i in range(n):
                f.write(json.dumps({"problem": f"What is {i}+1?", "answer": i + 1,
                                    "solution": f"{i}+1={i + 1}.\n\nSo {i + 1}."}) + "\n")
        spec = InputSpec(paths=(str(p),))
        t0 = time.perf_counter()
        list(itertools.islice(iter_solutions(spec, skip_bad=True, on_reject=print), 3))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        count = sum(1 for _ in iter_solutions(spec, skip_bad=True, on_reject=print))
        whole = time.perf_counter() - t0
    print(f"ingest: first 3 of {n:,} rows in {first:.3f} s; all {count:,} in {whole:.1f} s "
          f"({count / whole:,.0f} rows/s)")


def bench_generate() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.bundled import model_dir
    from pipeline.bundled.generator import generate_problems
    from pipeline.bundled.synthetic import PROMPT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(model_dir())
    model = AutoModelForCausalLM.from_pretrained(model_dir()).eval()
    row = generate_problems(1, seed=424242)[0]
    enc = tok(PROMPT_TEMPLATE.format(problem=row["problem"]), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        model.generate(**enc, do_sample=False, max_new_tokens=8, pad_token_id=tok.pad_token_id)
        t0 = time.perf_counter()
        out = model.generate(**enc, do_sample=False, max_new_tokens=256, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
        dt = time.perf_counter() - t0
    n = out.shape[1] - enc["input_ids"].shape[1]
    print(f"bundled model: one solution ({n} tokens) in {dt:.2f} s ({n / dt:,.0f} tok/s)")


if __name__ == "__main__":
    bench_ingest()
    bench_generate()
