"""How many workers a run will have, and how its solutions are cut into shards so no worker idles at the end.

Shards are the unit of work, resume and balance. With a fixed size, the run ends with some workers labeling
their last shard while others have nothing left: on 96 solutions, 4 GPUs and 8-solution shards that tail is
a fifth of the run. ``shard_sizes`` is guided self-scheduling (Polychronopoulos & Kuck, 1987): each shard
takes at most ``shard_size`` solutions and at most 1/(2·workers) of what is left, so the shards shrink
towards the end (to no less than a quarter of ``shard_size``) and the last wave is small on every worker. For a large run (more than
``2 · workers · shard_size`` solutions left) every shard but the last few has the full size.

The layout is decided once, at plan time, and recorded in the run's plan: a resumed run keeps the layout of
the run it resumes, whatever the number of workers it then has.
"""

from __future__ import annotations

import math


def shard_sizes(n: int, shard_size: int, workers: int = 1) -> list[int]:
    """Sizes of consecutive shards over ``n`` solutions (sum ``n``); shard i takes the next ``sizes[i]``."""
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    workers = max(1, int(workers))
    smallest = max(1, shard_size // 4)  # tiny shards cost a file each and batch poorly on a GPU
    sizes: list[int] = []
    left = int(n)
    while left > 0:
        s = shard_size if workers == 1 else min(shard_size, max(smallest, math.ceil(left / (2 * workers))))
        s = min(s, left)
        sizes.append(s)
        left -= s
    return sizes


def planned_workers(cfg) -> int:
    """The number of workers the run will most likely have, known before the executor starts (no Ray call):
    ``--num-workers`` if given; 1 for the local executor; else one per GPU of this machine for a GPU backend,
    or CPUs / ``--cpus-per-worker`` for a CPU backend. On a remote cluster (``--ray-address``) without
    ``--num-workers`` this is this machine's count, a guess: the layout only shapes the last shards."""
    from pipeline.execution.executors import _cpu_count, _gpu_count, choose_executor

    if cfg.num_workers:
        return int(cfg.num_workers)
    name, _ = choose_executor(cfg)
    if name != "ray":
        return 1
    spec = cfg.backend_spec
    gpus = cfg.gpus_per_worker or spec.gpus(cfg.backend_options)
    if gpus > 0:
        return max(1, int(_gpu_count() // gpus))
    return max(1, int(_cpu_count() // max(cfg.worker_cpus(), 1e-9)))
