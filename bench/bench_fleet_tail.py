#!/usr/bin/env python3
"""The end of a fleet run on CPU (issue 18): how the last shards are cut and handed out, before and after.

One kept Ray fleet of ``--workers`` hf actors (the bundled model, CPU) labels the same job again and again, the
two variants alternating so that both see the same machine load:

* ``count``: the layout and hand-out before issue 18's second session: the tail's shards hold equal numbers of
  solutions, and every actor holds two shards until the very end;
* ``work``: today's: the tail is cut to equal expected work (``pipeline.execution.sizing.weighted_cuts``) and,
  once no more shards are left than actors, each actor holds one at a time (``RayExecutor.run``).

Per run: labeling seconds, the tail (last shard end minus the first actor's last shard end) and each actor's
busy share, from the executor's shard timeline. The labels of both variants are the same (asserted): only the
layout and the order differ.

    python bench/bench_fleet_tail.py --solutions 48 --workers 2 --reps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_fleet import timeline_facts  # noqa: E402  (busy share per actor, end-of-run tail)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solutions", type=int, default=96)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    import random

    import pipeline.run as run_mod
    from pipeline import bundled
    from pipeline.config import LabelConfig
    from pipeline.execution.executors import RayExecutor
    from pipeline.storage.corpus import read_corpus

    rows = bundled.sample_path().read_text().splitlines()
    random.Random(a.seed).shuffle(rows)  # input order as it comes: shards of equal counts carry unequal work
    job = rows[: a.solutions]
    inp = Path(tempfile.mkdtemp(prefix="mcprm-tail-")) / "in.jsonl"
    inp.write_text("\n".join(job) + "\n")

    def cfg(tag: str) -> LabelConfig:
        return LabelConfig(input=[str(inp)], output=tempfile.mkdtemp(prefix=f"mcprm-tail-{tag}-"), k=a.k,
                           strategy="per-step", max_new_tokens=64, executor="ray", num_workers=a.workers,
                           cpus_per_worker=1, progress=False).resolved()

    real_cost, real_counted = run_mod.solution_cost, run_mod._Counted

    def variant(name: str) -> None:
        if name == "count":
            run_mod.solution_cost = lambda strategy: None  # Stager(cost=None): equal counts
            run_mod._Counted = lambda it, n: it  # no "left": two shards per actor to the end
        else:
            run_mod.solution_cost, run_mod._Counted = real_cost, real_counted

    fleet = RayExecutor(cfg("fleet"))
    fleet.wait_ready()
    out: dict[str, list[dict]] = {"count": [], "work": []}
    labels: dict[str, dict] = {}
    try:
        run_mod.label(cfg("warmup"), executor=fleet.borrow())  # first run of the fleet (imports, caches): not counted
        for rep in range(a.reps):
            for name in ("count", "work") if rep % 2 == 0 else ("work", "count"):
                variant(name)
                c = cfg(name)
                n0 = len(fleet.timeline)
                t = time.perf_counter()
                res = run_mod.label(c, executor=fleet.borrow())
                wall = time.perf_counter() - t
                tl = fleet.timeline[n0:]
                facts = timeline_facts(tl, a.workers)
                sizes = [t["solutions"] for t in sorted(tl, key=lambda t: t["submitted"])]
                rec = {"variant": name, "rep": rep, "labeling_s": res.manifest["throughput"].get("labeling_seconds"),
                       "wall_s": round(wall, 2), "shards": sizes, "busy": facts["busy_share"],
                       "tail_s": facts["tail_s"], "span_s": facts["span_s"]}
                out[name].append(rec)
                print(json.dumps(rec), flush=True)
                got = {r["key"]: (r["labels"], r["mc_correct"], r["mc_total"]) for r in read_corpus(res.output).to_pylist()}
                assert labels.setdefault(name, got) == got
    finally:
        variant("work")
        fleet.close()
    assert labels["count"] == labels["work"], "the variants must label alike"
    print(f"\n{a.solutions} solutions, {a.workers} hf actors (CPU), per-step K={a.k}, {a.reps} runs each "
          "(medians)\n")
    print("| variant | labeling s | tail s | busy (lowest actor) |")
    print("|---|---:|---:|---:|")
    for name in ("count", "work"):
        v = out[name]
        print(f"| {name} | {statistics.median(x['labeling_s'] for x in v):.1f} | "
              f"{statistics.median(x['tail_s'] for x in v):.1f} | {statistics.median(min(x['busy']) for x in v):.2f} |")


if __name__ == "__main__":
    main()
