"""How many workers a run will have, and how its solutions are cut into shards so no worker idles at the end.

Shards are the unit of work, resume and balance. With a fixed size, the run ends with some workers labeling
their last shard while others have nothing left: on 96 solutions, 4 GPUs and 8-solution shards that tail is
a fifth of the run. ``shard_sizes`` is factoring (Hummel, Schonberg & Flynn, 1992), guided self-scheduling in
waves, for workers that hold two shards at once: a wave is 2·workers equal shards, each at most ``shard_size``
solutions and at most 1/(4·workers) of what is left, so a small job is cut into equal shards (about four per
worker: every first wave is balanced) and a large one into full shards that shrink towards the end (to no less than a quarter of ``shard_size``), so the
last wave is small on every worker. For a large run (more than ``4 · workers · shard_size`` solutions left)
every shard but the last few has the full size.

Measured on 4 H200s (BENCHMARKS.md, "GPU fleet"): with 1/(2·workers) the first wave of a 96-solution job gave one
actor 23 solutions and another 12 (shards 12+11 vs 6+6), and efficiency was 0.81.

The layout is decided once, at plan time, and recorded in the run's plan: a resumed run keeps the layout of
the run it resumes, whatever the number of workers it then has.
"""

from __future__ import annotations

import bisect
import math

from pipeline.config import CPU_WORKER_THREADS  # noqa: F401  (declared with the options it defaults)


def shard_sizes(n: int, shard_size: int, workers: int = 1) -> list[int]:
    """Sizes of consecutive shards over ``n`` solutions (sum ``n``); shard i takes the next ``sizes[i]``."""
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    workers = max(1, int(workers))
    inflight = 2 * workers  # each worker holds two shards at once: the first wave is 2 x workers shards
    # tiny shards cost a file each and batch poorly on a GPU, but a small job still needs a few shards per worker
    smallest = max(1, min(shard_size // 4, n // (2 * inflight)))
    sizes: list[int] = []
    left = int(n)
    while left > 0:
        # one wave: as many equal shards as the workers hold at once, each 1/(2 x wave) of what is left
        s = shard_size if workers == 1 else min(shard_size, max(smallest, math.ceil(left / (2 * inflight))))
        for _ in range(inflight if workers > 1 else 1):
            if left <= 0:
                break
            sizes.append(min(s, left))
            left -= sizes[-1]
    return sizes


def solution_cost(strategy: str):
    """A solution's expected labeling work in relative units, from its number of steps (what a shard cut by
    :func:`weighted_cuts` balances), declared with the strategies (:attr:`pipeline.labeling.strategies.Strategy.cost`):
    per-step and the scans sample every prefix but the last (``steps - 1``); binary-search about ``1 + log2(steps)``
    probes."""
    from pipeline.labeling.strategies import STRATEGIES

    return STRATEGIES[strategy].cost


def weighted_cuts(costs: list[float], sizes: list[int]) -> list[int]:
    """Re-cut ``len(sizes)`` consecutive shards over solutions of ``costs`` so that each holds about the work the
    count layout ``sizes`` gives it on average: shard i ends where the running cost is nearest to
    ``(sizes[0] + ... + sizes[i]) x mean cost`` (cumulative targets: no drift, the last shard ends at the last
    solution; each shard keeps at least one solution). Equal costs give ``sizes`` back.

    Measured on 4 H200s (BENCHMARKS.md, "GPU fleet", second session): equal-count shards of 6 solutions with 3-10
    steps each carried 130-430 continuations, and one actor ran its last pair while the others idled."""
    n, m = len(costs), len(sizes)
    if m == 0 or n != sum(sizes):
        raise ValueError(f"weighted_cuts: {n} costs for shards of {sum(sizes)} solutions")
    if any(c <= 0 for c in costs):
        raise ValueError("weighted_cuts: costs must be > 0")
    mean = sum(costs) / n
    running = [0.0]  # running[e] = cost of the first e solutions (increasing)
    for c in costs:
        running.append(running[-1] + c)
    out: list[int] = []
    start = rows = 0
    for i, size in enumerate(sizes):
        rows += size
        left = m - i - 1  # shards after this one, one solution each at least
        if left == 0:
            end = n
        else:
            target = rows * mean
            j = bisect.bisect_left(running, target)
            cands = [e for e in (j - 1, j) if start + 1 <= e <= n - left] or [min(max(j, start + 1), n - left)]
            end = min(cands, key=lambda e: (abs(running[e] - target), abs(e - rows)))
        out.append(end - start)
        start = end
    return out





def planned_workers(cfg) -> int:
    """The number of workers the run will most likely have, known before the executor starts (no Ray call):
    ``--num-workers`` if given; 1 for the local executor; else one per GPU of this machine for a GPU backend,
    or CPUs / ``--cpus-per-worker`` for a CPU backend. On a remote cluster (``--ray-address``) without
    ``--num-workers`` this is this machine's count, a guess: the layout only shapes the last shards."""
    from pipeline.execution.executors import choose_executor, cpu_count, gpu_count

    if cfg.num_workers:
        return int(cfg.num_workers)
    name, _ = choose_executor(cfg)
    if name != "ray":
        return 1
    gpus = cfg.worker_gpus
    if gpus > 0:
        from pipeline.execution.ray_cluster import workers_fitting

        return max(1, workers_fitting(gpu_count(), gpus))
    return max(1, int(cpu_count() // max(cfg.worker_cpus(), 1e-9)))
