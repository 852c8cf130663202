"""``label()``: the whole labeling job as one Python function (the CLI and batch jobs call this).

Under the output's lock (one writer at a time), four phases, one module each:

1. :mod:`~pipeline.run.plan`: read the input once: validate every row before any rollout (bad rows stop the run,
   or with ``skip_bad`` go to ``rejects/vNNNNN.jsonl``), de-duplicate by content key, keep only solutions the
   corpus does not hold yet (a refresh labels what is new; the rest is reused), and stage them as deterministic
   shards (input order, sizes from ``shard_sizes``) beside the output (:mod:`~pipeline.run.staging`). The plan
   records per shard its staged file, count and key digest. The Ray executor's engines start meanwhile
   (:class:`~pipeline.run.execute.EarlyStart`), so their load overlaps the pass.
2. :mod:`~pipeline.run.resume`: write the plan, or, if an uncommitted run of the same work exists (a killed run),
   take over its plan and its finished shards, each verified.
3. :mod:`~pipeline.run.execute`: stream the remaining shards, read from their staged files (never the input
   again), through the executor (Ray actors or in-process) with bounded memory.
4. :mod:`~pipeline.run.commit`: write the new version's manifest (:mod:`pipeline.storage.manifest`), then replace
   ``manifest.json`` (the atomic commit point).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from pipeline.config import ConfigError, LabelConfig
from pipeline.run.commit import RunResult, commit_run
from pipeline.run.execute import EarlyStart, execute_run
from pipeline.run.plan import plan_run
from pipeline.run.resume import resume_run
from pipeline.storage.lock import corpus_lock
from pipeline.storage.output import storage_message
from pipeline.storage.store import CorpusStore

__all__ = ["RunResult", "label", "preflight"]

log = logging.getLogger("mcprm")


def preflight(cfg: LabelConfig, output: bool = True, backend: bool = True) -> None:
    """What a run checks before it touches anything: ``backend``: the backend and the device can run
    on this machine, and a model given by its hub name is in the local cache or the hub answers (neither
    checked for a Ray cluster's workers: --ray-address / RAY_ADDRESS); ``output``: the
    output folder is not a file. Raises a :class:`ConfigError` (or ``OutputIsAFile``) that says what to do."""
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
        from pipeline.storage.output import check_output_folder

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
    from pipeline.execution.shard_worker import WorkerError
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
            run = plan_run(cfg, store, version, starter)
            run.owner = lock.owner
            run.events["run_started"] = t0_wall
            if not run.added and run.base is not None and not run.base.get("_damaged"):
                prev_version = run.manifest["version"] if run.manifest else 0
                log.info("corpus %s is up to date (version %d): nothing new to label", cfg.output, prev_version)
                return RunResult(cfg.output, prev_version, 0, run.counts.reused, run.counts.rejected, run.manifest,
                                 time.perf_counter() - t0)
            lock.check()  # (a run frozen while it read the input must not clean up its successor's folder)
            resume_run(run)
            results, facts = execute_run(run, lock, executor)
            return commit_run(run, lock, results, facts, t0)
        except BaseException as e:
            from pipeline.storage.leftovers import after_lost_lock

            lost = after_lost_lock(store, version, lock, e)  # (an error that comes of a takeover: said as one)
            if lost is not None:
                raise lost from e
            raise


# ---- a run refused before it wrote anything leaves no folder it created


def new_local_folder(url: str) -> str | None:
    """The topmost folder of a local output path that does not exist yet (what a run would create), else None."""
    store = CorpusStore(url)
    if not store.local:
        return None  # an object store has no empty folders to leave behind
    path = os.path.abspath(store.root)
    if os.path.lexists(path):
        return None
    while True:
        parent = os.path.dirname(path)
        if parent == path or os.path.lexists(parent):
            return path
        path = parent


def remove_empty_folders(top: str) -> None:
    """Remove ``top`` and the folders below it, bottom up, where each is empty: a run refused before it wrote
    anything leaves no folder it created; anything written (by it or a concurrent run) stays."""
    for d, _subdirs, _files in os.walk(top, topdown=False):
        try:
            os.rmdir(d)  # only an empty folder; atomic, so a file another run writes meanwhile is never lost
        except OSError:
            pass
