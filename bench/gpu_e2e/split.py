"""Split `mcprm generate --n 8` output over train + held-out GSM8K-train problems into the two inputs of the run.

    python bench/gpu_e2e/split.py gen.jsonl problems_train.jsonl problems_heldout.jsonl train_sols.jsonl heldout8.jsonl [PER [HELD]]

train_sols: the first PER (2) samples of each training problem (to label). heldout8: the HELD (8) samples of each held-out
problem that has all HELD (generate drops empty samples; best-of-8 needs 8 per problem). A solution that came out as one step
(no blank line in it: generate's chat step separator) is cut at its single newlines instead, so it has steps to
label and score; counted as ``resplit``. Prints the counts as JSON.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def _ids(path: str) -> list[str]:
    import gzip

    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        return [json.loads(line)["id"] for line in f if line.strip()]


def main(gen: str, ptrain: str, pheld: str, out_train: str, out_held: str, per: str = "2", held_per: str = "8") -> int:
    train, held = _ids(ptrain), _ids(pheld)
    if set(train) & set(held):
        raise SystemExit("train and held-out problems overlap")
    by = defaultdict(list)
    with open(gen, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                by[r["problem_id"]].append(r)
    nt = nh = short = resplit = 0
    hist: dict[int, int] = defaultdict(int)

    def fix(r: dict) -> dict:
        nonlocal resplit
        if len(r["steps"]) == 1:
            lines = [x for x in r["steps"][0].split("\n") if x.strip()]
            if len(lines) > 1:
                r = dict(r, steps=lines)
                resplit += 1
        hist[min(len(r["steps"]), 10)] += 1
        return r

    with open(out_train, "w", encoding="utf-8") as f:
        for p in train:
            for r in by.get(p, [])[: int(per)]:
                f.write(json.dumps(fix(r)) + "\n")
                nt += 1
    with open(out_held, "w", encoding="utf-8") as f:
        for p in held:
            rs = by.get(p, [])
            if len(rs) < int(held_per):
                short += 1
                continue
            for r in rs[: int(held_per)]:
                f.write(json.dumps(fix(r)) + "\n")
                nh += 1
    print(json.dumps({"train_solutions": nt, "heldout_solutions": nh, "heldout_problems": nh // int(held_per),
                      "heldout_problems_dropped_short": short,
                      "resplit_at_newlines": resplit, "steps_hist_capped_10": dict(sorted(hist.items()))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:8]))
