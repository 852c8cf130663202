"""How much of the Ray executor's start hides behind the input pass, on this machine.

The real code path of ``mcprm label`` up to the first worker ready (no labeling), on a generated N-row input (the
bundled sample's rows, each problem made unique), each measurement in a fresh process (its own Ray start):

* ``sequential``: the input pass (``pipeline.run.plan.plan_run``: read, validate, stage), then the executor's start
  (``RayExecutor``: Ray, then the actors' model load) until the first worker is ready: what a run did before.
* ``overlapped``: the same pass with the early start (``pipeline.run.execute.EarlyStart``: Ray and the actors started at
  the input pass: a new corpus), then the wait for the first ready worker.

    python bench/bench_start_overlap.py --rows 20000 --reps 2

Prints one JSON line per measurement and a summary (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_input(path: Path, n: int) -> None:
    from pipeline.bundled import SAMPLE_PATH

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()]
    with open(path, "w") as f:
        for i in range(n):
            r = dict(rows[i % len(rows)])
            r["id"] = f"{r['id']}-{i}"
            r["problem"] = f"{r['problem']} (case {i})"
            r.pop("reference_first_error", None)
            f.write(json.dumps(r) + "\n")


def child(mode: str, inp: str, out: str, workers: int) -> dict:
    from pipeline.config import LabelConfig
    from pipeline.execution.executors import RayExecutor
    from pipeline.run.execute import EarlyStart
    from pipeline.run.plan import plan_run
    from pipeline.storage.store import CorpusStore

    cfg = LabelConfig(input=[inp], output=out, executor="ray", num_workers=workers, progress=False).resolved()
    store = CorpusStore(out)
    starter = EarlyStart(cfg) if mode == "overlapped" else None
    t0, w0 = time.perf_counter(), time.time()
    run = plan_run(cfg, store, 1, starter)
    t1 = time.perf_counter()
    shards = len(run.plan["shards"])
    ex = starter.take(shards) if starter is not None else RayExecutor(cfg, shards_hint=shards)
    ray = ex.ray
    done, _ = ray.wait([a.ready.remote() for a in ex.actors], num_returns=1)
    t2 = time.perf_counter()
    _node, t_init, t_ready = ray.get(done[0])  # the actor's own clock (same machine): constructor entered, ready
    ex.close()
    out = {"mode": mode, "solutions": run.added, "shards": shards, "workers": ex.num_workers,
           "input_s": round(t1 - t0, 2), "wait_after_input_s": round(t2 - t1, 2), "to_first_worker_s": round(t2 - t0, 2),
           "actor_entered_at_s": round(t_init - w0, 2), "actor_ready_at_s": round(t_ready - w0, 2)}
    if starter is not None:
        out["engine_asked_at_s"] = round(starter.started_at - run.events["input_started"], 3)  # into the pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--child", choices=["sequential", "overlapped"])
    ap.add_argument("--input")
    ap.add_argument("--output")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.input, a.output, a.workers)))
        return
    res: dict[str, list[dict]] = {"sequential": [], "overlapped": []}
    with tempfile.TemporaryDirectory(prefix="mcprm-overlap-") as tmp:
        inp = Path(tmp) / "in.jsonl"
        make_input(inp, a.rows)
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for rep in range(a.reps):
            for mode in ("sequential", "overlapped"):
                out = Path(tmp) / f"out-{mode}-{rep}"
                p = subprocess.run([sys.executable, __file__, "--child", mode, "--input", str(inp), "--output",
                                    str(out), "--workers", str(a.workers)], capture_output=True, text=True, env=env,
                                   cwd=ROOT)
                if p.returncode:
                    raise SystemExit(p.stderr[-3000:])
                r = json.loads(p.stdout.strip().splitlines()[-1])
                print(json.dumps(r), flush=True)
                res[mode].append(r)
    summary = {m: {k: statistics.median(r[k] for r in rs) for k in ("input_s", "wait_after_input_s", "to_first_worker_s")}
               for m, rs in res.items()}
    print(json.dumps({"summary": summary, "rows": a.rows, "reps": a.reps, "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
