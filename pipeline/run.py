"""``label()``: the whole labeling job as one Python function (the CLI and batch jobs call this).

Under the output's lock (one writer at a time), four steps, one function each:

1. :func:`_plan`: read the input once (:func:`_read_input`): validate every row before any rollout (bad
   rows stop the run, or with ``skip_bad`` go to ``rejects/vNNNNN.jsonl``), de-duplicate by content key,
   keep only solutions the corpus does not hold yet (a refresh labels what is new; the rest is reused), and
   stage them as deterministic shards (input order, sizes from ``shard_sizes``) beside the output
   (:mod:`pipeline.input.staging`). The plan records per shard its staged file, count and key digest. The Ray
   executor's engines start meanwhile (:class:`EarlyStart`), so their load overlaps the pass.
2. :func:`_resume`: write the plan, or, if an uncommitted run of the same work exists (a killed run), take
   over its plan and its finished shards, each verified.
3. :func:`_execute`: stream the remaining shards, read from their staged files (never the input again),
   through the executor (Ray actors or in-process) with bounded memory.
4. :func:`_commit`: write the new version's manifest (:mod:`pipeline.storage.manifest`), then replace
   ``manifest.json`` (the atomic commit point).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from pipeline.base_version import base_version, identity_diff
from pipeline.config import ConfigError, LabelConfig
from pipeline.execution.executors import CountedShards
from pipeline.execution.progress import LiveProgress as _Progress  # phases, ETA, one final line
from pipeline.execution.sizing import planned_workers, solution_cost
from pipeline.execution.startup import EarlyStart, startup_facts, worker_events
from pipeline.input.staging import resume_shards
from pipeline.storage.damaged import damaged_row_keys, dropped_rows, record_dropped
from pipeline.storage.integrity import current_manifest, verified_base
from pipeline.storage.lock import OutputLock, corpus_lock
from pipeline.storage.manifest import ExecutionFacts, InputCounts, build_manifest
from pipeline.storage.output import new_local_folder, remove_empty_folders, storage_message
from pipeline.storage.quarantine import quarantine
from pipeline.storage.rows import Solution
from pipeline.storage.store import CorpusStore, Fenced

log = logging.getLogger("mcprm")

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


def input_spec(cfg: LabelConfig):
    return cfg.reading.spec(
        gold_check=gold_check(cfg.grader, cfg.grader_timeout),
        prompt_check=_prompt_check(cfg),  # rows too long for the model, before any rollout
    )


def _prompt_check(cfg: LabelConfig):
    from pipeline.input.prompt_check import prompt_check

    return prompt_check(cfg)


@functools.lru_cache(maxsize=4)
def gold_check(grader: str, timeout_s: float):
    """The check of gold answers made during input validation, before any rollout, where the grader has one
    (``graders.registry.ChecksGolds``: the default sympy grader; one memo for all passes over the input); None
    for other graders, which may read gold answers differently."""
    from graders import GraderConfig, get_grader
    from graders.registry import ChecksGolds

    g = get_grader(grader)
    if not isinstance(g, ChecksGolds):
        return None
    from pipeline.input import GoldCheck

    return GoldCheck(functools.partial(g.check_golds, config=GraderConfig(timeout_s=timeout_s)))


def _iter_shards(run: _Run, skip: set[int]) -> Iterator[tuple[int, list[Solution]]]:
    """The planned shards not done yet, in order, each read from its staged file (never from the input)."""
    from pipeline.input.staging import read_staged

    for sh in run.plan["shards"]:
        if sh["shard"] not in skip:
            yield sh["shard"], read_staged(run.store, run.vdir, sh)


def preflight(cfg: LabelConfig, output: bool = True, backend: bool = True) -> None:
    """What a run checks before it touches anything: ``backend``: the backend and the device can run
    on this machine, and a model given by its hub name is in the local cache or the hub answers (neither
    checked for a Ray cluster's workers: --ray-address / RAY_ADDRESS); ``output``: the
    output folder is not a file. Raises a :class:`ConfigError` (or ``OutputIsAFile``) that says what to do."""
    import os

    from rollouts.registry import backend_problem

    if backend:
        remote = bool(cfg.ray_address or os.environ.get("RAY_ADDRESS"))
        why = backend_problem(cfg.backend, cfg.device, remote=remote)
        if why:
            raise ConfigError(why)
        if not remote and cfg.backend_spec.local_model:  # a hub name: cached here, or the hub answers
            from rollouts.hub import model_problem

            why = (model_problem(cfg.model, "model", "--model")
                   or model_problem(cfg.tokenizer, "tokenizer", "--tokenizer"))
            if why:
                raise ConfigError(why)
    if output:
        from pipeline.commands.outputs import check_output_folder

        check_output_folder(cfg.output)


def label(config: LabelConfig, executor=None) -> RunResult:
    """Label, commit a new version, return what was done. A storage error (disk full, read-only, permission)
    becomes a :class:`pipeline.storage.store.StorageError` naming the file and saying whether an earlier version is
    there to stay intact.

    Checked before anything is written (:func:`preflight`): the backend and device can run here (unless
    ``executor``, whose workers exist already, is given) and the output is not a file. A run refused before it
    wrote anything (bad input rows, no valid solution) leaves no output folder it created."""
    preflight(config, backend=executor is None and not config.fleet)
    fleet = None
    if executor is None:  # warm workers (--fleet's, or this machine's --keep-warm ones), leased before reading
        from pipeline.execution.executors import warm_executor

        executor = fleet = warm_executor(config)
    if fleet is not None:
        config = config.replace(num_workers=fleet.num_workers)  # the shard layout's workers: those leased
    try:
        created = new_local_folder(config.output)
        try:
            return _label_or_storage_error(config, executor)
        except BaseException:
            if created is not None:
                remove_empty_folders(created)
            raise
    finally:
        if fleet is not None:
            fleet.close()  # its leases released, its workers left warm


def _label_or_storage_error(config: LabelConfig, executor=None) -> RunResult:
    from pipeline.labeling.worker import WorkerError
    from pipeline.storage.failures import is_storage_failure

    try:
        return _label(config, executor)
    except OSError as e:
        raise storage_message(config.output, e) from e
    except WorkerError:
        raise
    except Exception as e:
        # A storage client's own error (botocore's NoCredentialsError, a GCS auth error): input failures are
        # named as such where they are read (pipeline.input), so what is left here is the output's.
        if not is_storage_failure(e) or isinstance(e, ConfigError) or type(e).__module__.startswith("pipeline."):
            raise
        raise storage_message(config.output, e) from e


# ---- integrity: recovered manifest, verified shards, fencing; see pipeline.storage.integrity


@dataclass
class _Run:
    """What one ``label()`` call knows as it goes: plan, resume, execute, commit."""

    cfg: LabelConfig
    store: CorpusStore
    manifest: dict | None  # the committed version found (None: a new corpus)
    base: dict | None  # the version whose shards the new one builds on (None: start afresh)
    version: int  # the version this run commits
    counts: InputCounts
    input_notes: object
    added: int = 0  # solutions to label: new to the corpus
    plan: dict = field(default_factory=dict)
    done_shards: dict[int, dict] = field(default_factory=dict)  # finished shards of a killed run, verified
    owner: str | None = None  # the lock owner's id: in every shard name this run writes (fenced shard writes)
    fleet: dict | None = None  # the warm fleet this run borrowed (manifest execution.fleet)
    starter: EarlyStart | None = None  # the Ray executor started while the input is read
    events: dict[str, float] = field(default_factory=dict)  # wall-clock start-up events (manifest throughput)
    damaged_seen: set[str] = field(default_factory=set)  # rows of damaged base shards the input still holds
    dropped: list[dict] = field(default_factory=list)  # rows of damaged shards left out (--drop-damaged)

    @property
    def vdir(self) -> str:
        return self.store.version_dir(self.version)


def _label(config: LabelConfig, executor=None) -> RunResult:
    from pipeline.faults import fault_point

    t0, t0_wall = time.perf_counter(), time.time()
    cfg = config.resolved()
    store = CorpusStore(cfg.output)
    starter = EarlyStart(cfg) if EarlyStart.wanted(cfg, executor) else None
    # (leaving the block, the starter kills an engine the run did not take: bad input, nothing to do, an error)
    with corpus_lock(store) as lock, starter or contextlib.nullcontext():
        # the number this run may commit, fixed when it got the lock: a run frozen past a takeover keeps to the
        # number its successor fenced (its folders), never the successor's
        version = store.next_version()
        fault_point("locked")
        try:
            run = _plan(cfg, store, version, starter)
            run.owner = lock.owner
            run.events["run_started"] = t0_wall
            if not run.added and run.base is not None and not run.base.get("_damaged"):
                prev_version = run.manifest["version"] if run.manifest else 0
                log.info("corpus %s is up to date (version %d): nothing new to label", cfg.output, prev_version)
                return RunResult(cfg.output, prev_version, 0, run.counts.reused, run.counts.rejected, run.manifest,
                                 time.perf_counter() - t0)
            lock.check()  # (a run frozen while it read the input must not clean up its successor's folder)
            _resume(run)
            results, facts = _execute(run, lock, executor)
            return _commit(run, lock, results, facts, t0)
        except BaseException as e:
            from pipeline.storage.leftovers import after_lost_lock

            lost = after_lost_lock(store, version, lock, e)  # (an error that comes of a takeover: said as one)
            if lost is not None:
                raise lost from e
            raise


def _plan(cfg: LabelConfig, store: CorpusStore, version: int | None = None, starter: EarlyStart | None = None
          ) -> _Run:
    """Which version to build on and to commit (``version``: fixed when the lock was taken), what the input holds
    that the corpus does not, in which shards (``starter``: the executor to start as the first of them is read)."""
    identity = cfg.identity()
    manifest = current_manifest(store, repair=True)
    if manifest is not None:  # a run killed after its commit, before it removed its staged input, plan, leftovers
        from pipeline.input.staging import STAGED
        from pipeline.storage.leftovers import remove_after_commit

        store.delete(f"{store.version_dir(manifest['version'])}/{STAGED}", recursive=True)
        below = [v for v in store.versions() if v < manifest["version"] and not store.is_fence(v)]
        remove_after_commit(store, manifest, max(below, default=0))
    base = base_version(cfg, manifest, identity)  # the version whose shards the new one builds on (None: afresh)
    version = version or store.next_version()

    base, existing = verified_base(store, base)
    run = _Run(cfg, store, manifest, base, version, InputCounts(), None, starter=starter)
    if starter is not None and base is None:  # every valid row is new: the engines load during the whole pass
        starter.start()
    shards, digest, stats = _read_input(run, existing)
    if not stats.solutions and base is None:
        raise ConfigError(f"no valid solutions in {', '.join(cfg.input)}; nothing to label")
    run.added = sum(sh["rows"] for sh in shards)
    run.counts = InputCounts(reused=stats.known, rejected=stats.rejected,
                             duplicates=stats.duplicates + stats.same_content)
    if base is not None and base.get("_damaged"):
        run.dropped = dropped_rows(store, base["_damaged"], run.damaged_seen, existing, cfg.output,
                                   cfg.drop_damaged)
    run.plan = {
        "identity": identity,
        "version": version,
        "shard_size": cfg.shard_size,
        "identity_fields": cfg.identity_dict(),  # names what differs when a re-run has other settings
        "solutions": run.added,
        "keys": digest,  # of every new content key in order: the same work whatever the shard boundaries
        "shards": shards,  # each: its staged file, rows and a digest of its keys (pipeline.input.staging)
    }
    return run


def _read_input(run: _Run, known):
    """The one pass over the input: validate every row (rejects to ``rejects/vNNNNN.jsonl`` with
    ``--skip-bad``, else an error naming them before anything is labeled), each content once, leave out what
    the corpus holds (``known``), and stage the rest as the run's shards (sizes from ``shard_sizes``, shard i
    takes the next ``sizes[i]`` solutions in input order). Returns (shard entries, digest of the keys, stats)."""
    from pipeline.input import IngestStats, RejectsWriter, iter_keyed_solutions
    from pipeline.input.staging import Stager
    from pipeline.notes import InputNotes  # warnings about the input

    cfg, store = run.cfg, run.store
    from pipeline.bundled import is_bundled_model

    run.input_notes = InputNotes(bundled_model=cfg.backend_spec.local_model and is_bundled_model(cfg.model))
    stats = IngestStats()
    rejects_rel = f"rejects/v{run.version:05d}.jsonl"
    rejects = RejectsWriter(store.uri(rejects_rel)) if cfg.skip_bad else None
    workers = planned_workers(cfg)
    stager = Stager(store, run.vdir, cfg.shard_size, workers,
                    cost=solution_cost(cfg.strategy) if workers > 1 else None)
    starter = run.starter
    run.events["input_started"] = time.time()
    damaged = damaged_row_keys(run.base)
    try:
        for key, sol in iter_keyed_solutions(input_spec(cfg), cfg.skip_bad, rejects, stats, limit=cfg.limit,
                                             known=known, on_solution=run.input_notes.observe):
            stager.add(key, sol)
            if key in damaged:
                run.damaged_seen.add(key)  # a damaged shard's row the input still holds: labeled again
            if starter is not None:
                starter.staged(stager.n)  # the engines load while the rest is read
        shards, digest = stager.finish()
    except BaseException:
        stager.discard()
        if rejects is not None:
            rejects.close(publish=False)
        raise
    if rejects is not None:
        rejects.close()
    if not stats.rejected:
        store.delete(rejects_rel)  # a killed earlier attempt's, for an input fixed since
    run.events["input_ended"] = time.time()
    return shards, digest, stats


def _resume(run: _Run) -> None:
    """Write the plan, or take over the plan of an unfinished run of the same work and its finished shards."""
    from pipeline.faults import fault_point
    from pipeline.input.staging import staged_names

    cfg, store, vdir, plan = run.cfg, run.store, run.vdir, run.plan
    staged = staged_names(store, vdir)
    try:
        old_plan = store.read_json(f"{vdir}/_plan.json")
    except RuntimeError as e:  # a damaged plan: the unfinished run is started again
        log.warning("%s; discarding the unfinished run", e)
        _discard(store, vdir, plan)
        old_plan = None
    if (old_plan is not None and old_plan != plan and old_plan.get("identity") == plan["identity"]
            and old_plan.get("keys") == plan["keys"] and old_plan.get("solutions") == plan["solutions"]
            and all(sh.get("staged") in staged for sh in old_plan["shards"])):
        # Same work, other --shard-size: keep the unfinished run's shard boundaries and its finished shards.
        log.info("resuming with the unfinished run's shard size %s", old_plan.get("shard_size"))
        run.plan = plan = old_plan
    if old_plan is not None and old_plan != plan:
        if old_plan.get("identity") != plan["identity"]:  # name the field; nothing committed: replace
            diff = identity_diff(old_plan.get("identity_fields") or {}, cfg.identity_dict())
            if run.manifest is not None and not cfg.overwrite:
                raise ConfigError(
                    f"{cfg.output} has an unfinished run with a different configuration ({diff}). Rerun it "
                    "with its own settings to finish it, or pass --overwrite to discard it."
                )
            log.warning("discarding an unfinished run in %s that committed nothing, made with a different "
                        "configuration (%s)", store.uri(vdir), diff)
        else:
            log.warning("discarding an unfinished run in %s whose input differs", store.uri(vdir))
        _discard(store, vdir, plan)
        old_plan = None
    committed = run.manifest["version"] if run.manifest else 0
    if old_plan is None:
        store.write_bytes(f"{vdir}/_plan.json", json.dumps(plan, separators=(",", ":")).encode() + b"\n")
        fault_point("plan-written")
    if old_plan is not None or run.version > committed + 1:  # (numbers fenced since the commit: their work)
        run.done_shards = resume_shards(store, plan, run.version, run.owner, committed)
        if run.done_shards:
            log.info("resuming: %d of %d shards already done", len(run.done_shards), len(plan["shards"]))
    _drop_staged(store, vdir, staged - {sh["staged"] for sh in plan["shards"]})


def _discard(store: CorpusStore, vdir: str, plan: dict) -> None:
    """Remove an unfinished run's files from ``vdir``, but not the staged shards ``plan`` reads."""
    from pipeline.input.staging import STAGED, staged_names

    try:
        entries = store.fs.ls(store.path(vdir), detail=False)
    except FileNotFoundError:
        return
    for e in entries:
        name = e.rstrip("/").rsplit("/", 1)[-1]
        if name != STAGED:
            store.delete(f"{vdir}/{name}", recursive=True)
    _drop_staged(store, vdir, staged_names(store, vdir) - {sh["staged"] for sh in plan["shards"]})


def _drop_staged(store: CorpusStore, vdir: str, names) -> None:
    from pipeline.input.staging import STAGED

    for name in names:
        store.delete(f"{vdir}/{STAGED}/{name}.parquet")


def _execute(run: _Run, lock: OutputLock, executor=None) -> tuple[dict[int, dict], ExecutionFacts]:
    """Label the shards not done yet through the executor (``executor``: one kept across runs, e.g.
    ``RayExecutor.borrow()``; else one made for this run); every shard's result, and how it ran."""
    cfg, plan, done_shards = run.cfg, run.plan, run.done_shards
    results: dict[int, dict] = dict(done_shards)
    todo = run.added - sum(r["rows"] for r in done_shards.values())
    progress = _Progress(todo, cfg.progress)
    t_run = time.perf_counter()
    worker_stats: list[dict] = []
    own = executor is None  # started by this run (its start-up events are recorded)
    if todo > 0:
        from pipeline.execution.executors import make_executor

        if executor is None and run.starter is not None:  # started while the input was read
            executor = run.starter.take(len(plan["shards"]) - len(done_shards))
            if executor is not None:
                run.events["engine_started"] = run.starter.started_at
        if executor is None:
            run.events["engine_started"] = time.time()
            executor = make_executor(cfg, shards_hint=len(plan["shards"]) - len(done_shards))
        try:
            def on_done(res: dict) -> None:
                if res["shard"] in results:  # a retried task's second attempt: the first one recorded stays
                    log.info("shard %d finished twice (a retried task); keeping %s", res["shard"],
                             results[res["shard"]]["path"])
                    return
                results[res["shard"]] = res
                lock.check()  # a run that lost its lock stops now, not at the commit
                progress.shard(res)

            executor.on_solution = progress.solution  # live counts from the workers, where supported
            progress.start()
            shards = CountedShards(_iter_shards(run, set(done_shards)), len(plan["shards"]) - len(done_shards))
            version = Fenced(run.version, run.owner)  # shard names carry this owner's id
            executor.run(version, shards, on_done, cfg)  # a kept executor's workers label with this run's settings
            worker_stats = executor.backend_stats()
            if hasattr(executor, "manifest_entry"):  # a fleet's workers, or this run's kept warm
                run.fleet = executor.manifest_entry()
        finally:
            progress.close()
            executor.close()
        if own:
            worker_events(run.events, executor)
    run_seconds = time.perf_counter() - t_run
    missing = [sh["shard"] for sh in plan["shards"] if sh["shard"] not in results]
    if missing:
        raise RuntimeError(f"shards {missing[:10]} did not finish; rerun the same command to resume")
    if executor is None:  # nothing left to label
        return results, ExecutionFacts(run_seconds=run_seconds, worker_stats=worker_stats)
    return results, ExecutionFacts(
        run_seconds=run_seconds, startup_seconds=min(run_seconds, executor.startup_seconds),
        workers=executor.num_workers, gpus=gpus_held(executor.num_workers, cfg.backend_spec.gpus(cfg.backend_options)),
        retried={str(k): v for k, v in executor.retried.items()}, worker_stats=worker_stats)


def gpus_held(workers: int, gpus_each: float) -> int:
    """GPUs a run holds (what its GPU-seconds count): its workers' shares, a GPU with any share counted whole (the
    in-process worker with N engines on a GPU, or workers of 1/N GPU that do not fill their last GPU)."""
    import math

    return math.ceil(workers * gpus_each - 1e-6) if gpus_each > 0 else 0


def _commit(run: _Run, lock: OutputLock, results: dict[int, dict], facts: ExecutionFacts, t0: float) -> RunResult:
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
    from pipeline.input.staging import STAGED

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
