"""Run by tests/integration/test_engine_placement.py in its own process: a local two-node Ray cluster whose nodes
declare one (fake) GPU each, and probe actors with exactly the resources the Ray executor gives vLLM workers with
``--engines-per-gpu 2``. Each probe says where Ray put it, how many engines it would start, and when it held its
GPU's engine start lock. Prints one JSON line."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time

import ray
from _ray_files import own_ray_files  # this folder: the script runs as a file, its folder first on sys.path
from ray.cluster_utils import Cluster

from pipeline.config import LabelConfig
from pipeline.execution.ray_cluster import check_resources, worker_shape


class Probe:
    def where(self, lock_dir: str) -> dict:
        import os

        from rollouts.engine_sizing import gpu_start_lock
        from rollouts.options import VLLMOptions
        from rollouts.registry import engines_here

        with gpu_start_lock(folder=lock_dir):
            t0 = time.time()
            time.sleep(0.3)  # an engine start, shortened
            t1 = time.time()
        ctx = ray.get_runtime_context()
        return {"node": ctx.get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "gpu_share": ctx.get_assigned_resources().get("GPU"),
                "engines_here": engines_here(VLLMOptions(engines_per_gpu=2)), "lock": [t0, t1]}


def main() -> None:
    nodes, gpus_per_node = int(sys.argv[1]), int(sys.argv[2])
    with own_ray_files() as folder:  # Ray's files in a folder of this probe's own, not a session folder in /tmp/ray
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2 * gpus_per_node,
                                                                "num_gpus": gpus_per_node,
                                                                "include_dashboard": False, "temp_dir": folder})
        lock_dir = tempfile.mkdtemp(prefix="mcprm-probe-locks-")
        try:
            for _ in range(nodes - 1):
                cluster.add_node(num_cpus=2 * gpus_per_node, num_gpus=gpus_per_node)
            ray.init(address=cluster.address, log_to_driver=False)
            cluster.wait_for_nodes()
            cfg = LabelConfig(backend="vllm", engines_per_gpu=2, model="/nonexistent")
            n, cpus, gpus = worker_shape(ray, cfg)
            check_resources(ray, cfg, n, cpus, gpus)
            actor = ray.remote(num_cpus=cpus, num_gpus=gpus)(Probe)
            probes = [actor.remote() for _ in range(n)]
            got = ray.get([p.where.remote(lock_dir) for p in probes], timeout=120)
            print(json.dumps({"shape": [n, cpus, gpus], "probes": got}))
        finally:
            ray.shutdown()
            cluster.shutdown()
            shutil.rmtree(lock_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
