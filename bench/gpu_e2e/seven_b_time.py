"""Time alone at 7B: the defaults against per-step K=8 on one GPU, random weights of the Qwen2.5-7B shape
(bench/gpu_workload.py), the fleet benchmark's job shape (bench/gpu_fleet.py write_job), 128 new tokens with ignore_eos, one
engine (a RayExecutor kept across both runs: no start in either run). Prints a JSON line per run.

With random weights no continuation reaches a gold answer: every probe of the defaults is dead and draws all K=20,
so this times a search that real data does not make (BENCHMARKS.md, "7B, time alone").
    PYTHONPATH=/tmp/site:/tmp/mcprm python3 bench/gpu_e2e/seven_b_time.py [N] [defaults,per-step]   (on the device)
"""

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_fleet import MAX_TOKENS, write_job  # noqa: E402
from gpu_workload import make_model_dir  # noqa: E402

from pipeline.config import LabelConfig  # noqa: E402
from pipeline.execution.executors import RayExecutor  # noqa: E402
from pipeline.run import label  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 120
mdir, tdir = make_model_dir("7b")
base = dict(input=[write_job(n, "int")], model=mdir, tokenizer=tdir, backend="vllm", executor="ray",
            max_new_tokens=MAX_TOKENS, load_format="dummy", prompt_template="{problem} ", step_separator=" ",
            ignore_eos=True, dtype="bfloat16", max_model_len=4096, num_workers=1, progress=False)
t = time.time()
fleet = RayExecutor(LabelConfig(**dict(base, output=tempfile.mkdtemp())).resolved())
fleet.wait_ready()
print(json.dumps({"start_s": round(time.time() - t, 1), "solutions": n}), flush=True)
runs = {"per-step": ("per-step K=8", dict(strategy="per-step", k=8)), "defaults": ("defaults", {})}
for name, over in (runs[r] for r in (sys.argv[2] if len(sys.argv) > 2 else "per-step,defaults").split(",")):
    cfg = LabelConfig(**dict(base, output=tempfile.mkdtemp(), **over))
    t = time.time()
    res = label(cfg, executor=fleet.borrow())
    th, c = res.manifest["throughput"], res.manifest["counts"]
    print(json.dumps({"run": name, "labeling_s": th.get("labeling_seconds"), "tokens": c["rollout_tokens"],
                      "rollouts": c["rollouts"], "tok_per_s": th.get("generated_tokens_per_s"),
                      "wall_s": round(time.time() - t, 1)}), flush=True)
fleet.close()
