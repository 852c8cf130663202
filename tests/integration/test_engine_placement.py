"""``--engines-per-gpu N`` on a Ray cluster: N workers of 1/N GPU each, every GPU of every node holding N of them,
each worker one engine, and the engines of one GPU starting one at a time. Real Ray (a local cluster of two nodes
with declared GPUs; no CUDA is touched, so no GPU is needed); the workers are probes with the executor's resource
shape, since vLLM itself needs a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from .conftest import budget

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(400)
def test_two_engines_per_gpu_over_two_nodes():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               RAY_USAGE_STATS_ENABLED="0")
    r = subprocess.run([sys.executable, str(ROOT / "tests/integration/_placement_probe.py"), "2", "1"],
                       capture_output=True, text=True, timeout=budget(360), env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    n, cpus, gpus = res["shape"]
    assert (n, gpus) == (4, 0.5)  # 2 GPUs x 2 engines, half a GPU each
    probes = res["probes"]
    per_gpu = Counter((p["node"], tuple(p["gpu_ids"])) for p in probes)
    assert len({p["node"] for p in probes}) == 2
    assert sorted(per_gpu.values()) == [2, 2]  # one engine set per GPU: each GPU of each node holds two
    assert all(p["gpu_share"] == 0.5 and p["engines_here"] == 1 for p in probes)  # a fraction: one engine each
    assert all(p["cuda_visible"] == ",".join(p["gpu_ids"]) for p in probes)  # what the start lock is keyed by
    for key in per_gpu:  # the two engines of one GPU never started at the same time
        (a0, a1), (b0, b1) = sorted(p["lock"] for p in probes if (p["node"], tuple(p["gpu_ids"])) == key)
        assert a1 <= b0
