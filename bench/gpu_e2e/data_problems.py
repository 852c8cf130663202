"""The problems of the data run (bench/gpu_e2e/README.md, "The data run"), from the GSM8K **train** split:

    python bench/gpu_e2e/data_problems.py ../shared/data/gsm8k_train.jsonl.gz bench/gpu_e2e

writes ``problems_big_train.jsonl.gz`` (train lines 0-2499: solutions to label and train on) and
``problems_big_heldout.jsonl.gz`` (lines 6973-7472, the last 500: best-of-8 only, never labeled or trained on),
one ``{id, problem, answer}`` a line as in ``problems_train.jsonl`` (the answer is the text after ``####``,
thousands separators removed). The two ranges never overlap; the held-out range holds the 100 held-out problems
of the smaller run (7373-7472), so their numbers can be compared.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

TRAIN = range(0, 2500)
HELDOUT = range(6973, 7473)


def problem(i: int, row: dict) -> dict:
    return {"id": f"gsm8k-train-{i}", "problem": row["question"],
            "answer": row["answer"].split("####")[-1].strip().replace(",", "")}


def main(src: str, out_dir: str) -> int:
    with gzip.open(src, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) <= HELDOUT[-1]:
        raise SystemExit(f"{src}: {len(rows)} rows; the held-out range needs {HELDOUT[-1] + 1}")
    for name, idx in (("train", TRAIN), ("heldout", HELDOUT)):
        path = Path(out_dir) / f"problems_big_{name}.jsonl.gz"
        # mtime 0: the same input gives the same bytes
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            for i in idx:
                f.write((json.dumps(problem(i, rows[i])) + "\n").encode())
        print(f"{path}: {len(idx)} problems")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
