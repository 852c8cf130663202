"""The commit phase of ``label()``: quarantine the rows the workers failed on, write the new version's manifest
(:mod:`pipeline.storage.manifest`, with the run's start-up facts) and its confidence model, then replace
``manifest.json`` (the atomic commit point, fenced by the lock), and remove what the committed version no longer
needs (the staged input, the plan, leftovers of earlier attempts)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from pipeline.run.plan import Run
from pipeline.run.staging import STAGED
from pipeline.storage.damaged import record_dropped
from pipeline.storage.lock import OutputLock
from pipeline.storage.manifest import ExecutionFacts, build_manifest
from pipeline.storage.quarantine import quarantine


@dataclass
class RunResult:
    output: str
    version: int
    added: int
    reused: int
    rejected: int
    manifest: dict
    seconds: float
    shards_run: int = 0
    shards_resumed: int = 0
    shard_results: list[dict] = field(default_factory=list)
    committed: bool = False  # this run committed a new version (``version``), even one that labeled nothing new


def commit_run(run: Run, lock: OutputLock, results: dict[int, dict], facts: ExecutionFacts, t0: float) -> RunResult:
    """Write the new version's manifest and replace ``manifest.json`` (fenced by the lock), drop the plan."""
    from pipeline.notes import run_notes  # executor, warnings

    cfg, store, plan = run.cfg, run.store, run.plan
    lock.check()  # a run that lost its lock stops before reading its shards again (the fence is in commit)
    quarantined = quarantine(store, run.version, results)  # rows the workers failed on (--skip-bad)
    if quarantined:
        run.counts = dataclasses.replace(run.counts, rejected=run.counts.rejected + quarantined)
    new_manifest = build_manifest(cfg, plan, results, run.base, run.manifest, run.counts, facts)
    new_manifest.update(run_notes(cfg, store, [results[sh["shard"]]["path"] for sh in plan["shards"]],
                                  run.input_notes))
    if run.fleet:  # borrowed workers: no engine start in this run, said where the executor is
        ex = new_manifest.get("execution", {})
        reason = run.fleet["reason"] if run.fleet["borrowed"] else f"{ex.get('reason')}; {run.fleet['reason']}"
        new_manifest["execution"] = {**ex, "reason": reason, "fleet": run.fleet}
    new_manifest["throughput"].update(startup_facts(run.events))  # input reading and engine start
    from pipeline.storage.confidence import fit_version_model, write_version_confidence

    new_manifest["first_error_model"] = fit_version_model(store, new_manifest["shards"])
    write_version_confidence(store, run.version, new_manifest, fence=lock.check)
    record_dropped(new_manifest, run.dropped)  # rows of damaged shards left out (--drop-damaged): said, never silent
    store.commit(new_manifest, fence=lock.check)
    store.delete(f"{run.vdir}/{STAGED}", recursive=True)  # the staged input is labeled and committed now
    store.delete(f"{run.vdir}/_plan.json")
    if lock.still_held():  # the folder holds exactly what the version records (readers glob data/**/*.parquet)
        from pipeline.storage.leftovers import remove_after_commit

        remove_after_commit(store, new_manifest, run.manifest["version"] if run.manifest else 0)
    return RunResult(
        cfg.output, run.version, run.added, run.counts.reused, run.counts.rejected, new_manifest,
        time.perf_counter() - t0, shards_run=len(results) - len(run.done_shards),
        shards_resumed=len(run.done_shards), shard_results=[results[i] for i in sorted(results)], committed=True,
    )


def startup_facts(events: dict[str, float]) -> dict:
    """The manifest's start-up fields from the run's wall-clock events: ``input_seconds`` (reading and
    validating the input), ``engine_start_seconds`` (the engine start this run made: asked for until the first
    worker was ready; absent for a caller's or a fleet's workers), ``startup_overlap_seconds`` (how much of that
    start ran while the input was still being read) and ``startup_events`` (each event's seconds since the run
    began)."""
    ev, out = events, {}
    if "input_started" in ev and "input_ended" in ev:
        out["input_seconds"] = round(ev["input_ended"] - ev["input_started"], 3)
    if "engine_started" in ev and "first_worker_ready" in ev:
        begin, ready = ev["engine_started"], max(ev["engine_started"], ev["first_worker_ready"])
        out["engine_start_seconds"] = round(ready - begin, 3)
        hidden = min(ready, ev.get("input_ended", begin)) - max(begin, ev.get("input_started", begin))
        out["startup_overlap_seconds"] = round(max(0.0, hidden), 3)
    else:
        out["startup_overlap_seconds"] = 0.0
    t0 = ev.get("run_started")
    if t0 is not None:
        out["startup_events"] = {k: round(v - t0, 3) for k, v in sorted(ev.items(), key=lambda kv: kv[1])
                                 if k != "run_started"}
    return out
