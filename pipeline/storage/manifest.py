"""The manifest a run commits (``OUT/manifest.json``, ``OUT/versions/vNNNNN.json``): its format in one place.

Keys: ``format``, ``schema_version``, ``version``, ``created``, ``identity`` and ``identity_fields`` (what a
label means), ``config``, ``versions``, ``strategy``, ``k``, ``shards`` (path, rows, version, bytes, sha256),
``history`` (one entry per committed version), ``counts`` (this version: a resumed run counts the shards it
took over as the run that labeled them did, from their sidecars), ``totals`` (all versions) and
``throughput`` (this run: its own rollouts, tokens, seconds and rates). ``pipeline.run`` adds ``execution`` and ``warnings`` (:mod:`pipeline.notes`);
:class:`pipeline.storage.store.CorpusStore` commits it.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.storage.schema import SCHEMA_VERSION


class RunConfig(Protocol):
    """What the manifest records of a run's configuration (a ``pipeline.config.LabelConfig``): storage stands
    below the configuration and names only these."""

    strategy: str
    k: int

    def identity_dict(self) -> dict: ...

    def to_dict(self) -> dict: ...


@dataclass(frozen=True)
class InputCounts:
    """What the input scan found besides the solutions to label."""

    reused: int = 0  # solutions the base version already holds
    rejected: int = 0  # rows rejected (--skip-bad)
    duplicates: int = 0  # exact duplicates skipped


@dataclass(frozen=True)
class ExecutionFacts:
    """How the shards ran: wall time, engine start-up, workers and GPUs, retries, the workers' backend counters."""

    run_seconds: float = 0.0
    startup_seconds: float = 0.0
    workers: int = 0
    gpus: int = 0
    retried: dict = field(default_factory=dict)
    worker_stats: list = field(default_factory=list)
    demand: dict | None = None  # pipeline.labeling.ahead.demand_summary of the workers' loads
    # seconds this run's engines held their GPUs before its shards began: an engine started while the input was
    # read holds its GPU from then on, so it is part of the bill though not of run_seconds
    held_before_s: float = 0.0


def versions() -> dict:
    """The versions of mcprm, its grader, the schema and the engines loaded (recorded in every manifest)."""
    out = {"mcprm": _mcprm_version(), "python": platform.python_version(), "schema": SCHEMA_VERSION}
    from graders import GRADER_VERSION

    out["grader"] = GRADER_VERSION  # the default grader's version; the run's own is in identity_fields
    for mod in ("torch", "transformers", "vllm", "sglang", "ray", "pyarrow"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = getattr(m, "__version__", "?")
    return out


def _mcprm_version() -> str:
    try:
        from importlib.metadata import version

        return version("mcprm")
    except Exception:  # pragma: no cover - running from a checkout without install
        return "0+unknown"


def build_manifest(cfg: RunConfig, plan: dict, results: dict[int, dict], prev: dict | None, last: dict | None,
                   counts: InputCounts, run: ExecutionFacts) -> dict:
    """The manifest of the version ``plan`` builds: ``prev``'s shards (the base; None: afresh) plus the new ones
    (``results`` by shard), ``last``'s history (the committed version) plus this run, counts and throughput."""
    version, identity = plan["version"], plan["identity"]
    reused, n_rejected, dup = counts.reused, counts.rejected, counts.duplicates
    run_seconds, worker_stats = run.run_seconds, run.worker_stats
    new_shards = [
        {"path": results[sh["shard"]]["path"], "rows": results[sh["shard"]]["rows"], "version": version,
         **{k: results[sh["shard"]][k] for k in ("bytes", "sha256") if k in results[sh["shard"]]}}
        for sh in plan["shards"]
    ]
    shards = (prev["shards"] if prev else []) + new_shards
    ran = [r for r in results.values() if not r.get("resumed")]
    labeled_run = sum(r.get("rows", 0) for r in ran)
    rollouts = sum(r["rollouts"] for r in results.values())
    tokens = sum(r["rollout_tokens"] for r in results.values())
    gen_tokens_run = sum(r["rollout_tokens"] for r in ran)
    rollouts_run = sum(r["rollouts"] for r in ran)
    # Backend counters are cumulative per worker, so they are summed over workers (not shards).
    backend: dict = {}
    for w in worker_stats:
        for k in ("requests", "samples", "prompt_tokens", "generated_tokens", "cached_prompt_tokens",
                  "generate_seconds", "prefix_cache_queries"):
            if isinstance(w.get(k), (int, float)):
                backend[k] = round(backend.get(k, 0) + w[k], 3)
    queries = backend.get("prefix_cache_queries") or backend.get("prompt_tokens", 0)
    hit = backend.get("cached_prompt_tokens", 0) / queries if queries else None
    startup = run.startup_seconds
    labeling = run_seconds - startup
    held = run_seconds + max(0.0, run.held_before_s)  # the GPUs' time: from the engine's start, not the shards'
    added = sum(s["rows"] for s in new_shards)
    prev_totals = (prev or {}).get("totals", {})
    return {
        "format": "mcprm-corpus",
        "schema_version": SCHEMA_VERSION,
        "version": version,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "identity": identity,
        "identity_fields": cfg.identity_dict(),
        "config": cfg.to_dict(),
        "versions": versions(),
        "strategy": cfg.strategy,
        "k": cfg.k,
        "shards": shards,
        "history": ((last or {}).get("history") or []) + [
            {"version": version, "identity": identity, "added": added, "reused": reused, "rejected": n_rejected,
             "duplicates_in_input": dup, "shards": [s["path"] for s in new_shards],
             "rollouts": rollouts, "rollout_tokens": tokens, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        ],
        "counts": {
            "solutions": sum(s["rows"] for s in shards),
            "added": added,
            "reused": reused,
            "rejected": n_rejected,
            "duplicates_in_input": dup,
            "steps_added": sum(r.get("steps", 0) for r in results.values()),
            "rollouts": rollouts,
            "rollout_tokens": tokens,
            # continuations also counted as draws of a later prefix (rollout reuse): no tokens of their own
            "reused_rollouts": sum(r.get("reused_rollouts", 0) for r in results.values()),
            # continuations drawn ahead at the end of a job and dropped (no draw of any step; in rollouts, tokens)
            "drawn_ahead_dropped": sum(r.get("drawn_ahead_dropped", 0) for r in results.values()),
        },
        "totals": {
            "rollouts": prev_totals.get("rollouts", 0) + rollouts,
            "rollout_tokens": prev_totals.get("rollout_tokens", 0) + tokens,
        },
        "throughput": {
            # this run only (a resumed run did not label the shards it took over; ``counts`` are the version's,
            # the same as an uninterrupted run's). seconds = startup (model / engine load, all workers in
            # parallel) + labeling; rates are per labeling second, the rate a longer run approaches.
            "rollouts": rollouts_run,
            "rollout_tokens": gen_tokens_run,
            "shards_run": len(ran),
            "shards_resumed": len(results) - len(ran),
            "seconds": round(run_seconds, 3),
            "startup_seconds": round(startup, 3),
            "labeling_seconds": round(labeling, 3),
            "workers": run.workers,
            "gpus": run.gpus,
            "rollouts_per_s": round(rollouts_run / labeling, 2) if labeling > 0 else None,
            "generated_tokens_per_s": round(gen_tokens_run / labeling, 2) if labeling > 0 else None,
            "generated_tokens_per_s_incl_startup": round(gen_tokens_run / run_seconds, 2) if run_seconds > 0 else None,
            "prefix_cache_hit_rate": round(hit, 4) if hit is not None else None,
            # what users pay: GPU-seconds held by this run (every GPU for the whole run, start-up
            # included) and per solution it labeled; None on CPU
            "gpu_seconds": round(held * run.gpus, 3) if run.gpus else None,
            "labeling_gpu_seconds": round(labeling * run.gpus, 3) if run.gpus else None,
            "gpu_seconds_per_solution": (round(held * run.gpus / labeled_run, 4)
                                         if run.gpus and labeled_run else None),
            "retried_shards": run.retried,
            "backend": backend,
            # continuations each worker had in flight over its labeling time, against what its engines run at
            # once: the share below that is time the engines were short of work (pipeline.labeling.ahead)
            **({"engine_demand": run.demand} if run.demand else {}),
        },
    }
