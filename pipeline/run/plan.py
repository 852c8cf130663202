"""The plan phase of ``label()``: which committed version the run builds on, what the input holds that the corpus
does not, and in which shards.

The base is the current version, unless it was labeled with another configuration or written with another schema
version: labels of either kind are never mixed in one corpus version (refused, naming what differs, or with
``--overwrite`` the run starts a new corpus version). The one pass over the input validates every row, keeps each
content once, leaves out what the base holds and stages the rest as the run's shards (:mod:`pipeline.run.staging`).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

from pipeline.config import ConfigError, LabelConfig
from pipeline.execution.sizing import planned_workers, solution_cost
from pipeline.storage.damaged import damaged_row_keys, dropped_rows
from pipeline.storage.integrity import current_manifest, verified_base
from pipeline.storage.manifest import InputCounts
from pipeline.storage.schema import SCHEMA_VERSION
from pipeline.storage.store import CorpusStore

log = logging.getLogger("mcprm")


@dataclass
class Run:
    """What one ``label()`` call knows as it goes, handed from phase to phase: made here, then completed by
    resume (``done_shards``), execute (``fleet``, ``events``) and read by commit."""

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
    starter: object | None = None  # the Ray executor started while the input is read (execute.EarlyStart)
    events: dict[str, float] = field(default_factory=dict)  # wall-clock start-up events (manifest throughput)
    damaged_seen: set[str] = field(default_factory=set)  # rows of damaged base shards the input still holds
    dropped: list[dict] = field(default_factory=list)  # rows of damaged shards left out (--drop-damaged)

    @property
    def vdir(self) -> str:
        return self.store.version_dir(self.version)


def plan_run(cfg: LabelConfig, store: CorpusStore, version: int | None = None, starter=None) -> Run:
    """Which version to build on and to commit (``version``: fixed when the lock was taken), what the input holds
    that the corpus does not, in which shards (``starter``: the executor to start as the first of them is read)."""
    identity = cfg.identity()
    manifest = current_manifest(store, repair=True)
    if manifest is not None:  # a run killed after its commit, before it removed its staged input, plan, leftovers
        from pipeline.run.staging import STAGED
        from pipeline.storage.leftovers import remove_after_commit

        store.delete(f"{store.version_dir(manifest['version'])}/{STAGED}", recursive=True)
        below = [v for v in store.versions() if v < manifest["version"] and not store.is_fence(v)]
        remove_after_commit(store, manifest, max(below, default=0))
    base = base_version(cfg, manifest, identity)  # the version whose shards the new one builds on (None: afresh)
    version = version or store.next_version()

    base, existing = verified_base(store, base)
    run = Run(cfg, store, manifest, base, version, InputCounts(), None, starter=starter)
    if starter is not None and base is None:  # every valid row is new: the engines load during the whole pass
        starter.start()
    shards, digest, stats = read_input(run, existing)
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
        "shards": shards,  # each: its staged file, rows and a digest of its keys (pipeline.run.staging)
    }
    return run


def read_input(run: Run, known):
    """The one pass over the input: validate every row (rejects to ``rejects/vNNNNN.jsonl`` with
    ``--skip-bad``, else an error naming them before anything is labeled), each content once, leave out what
    the corpus holds (``known``), and stage the rest as the run's shards (sizes from ``shard_sizes``, shard i
    takes the next ``sizes[i]`` solutions in input order). Returns (shard entries, digest of the keys, stats)."""
    from pipeline.input import IngestStats, RejectsWriter, iter_keyed_solutions
    from pipeline.notes import InputNotes  # warnings about the input
    from pipeline.run.staging import Stager

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


def input_spec(cfg: LabelConfig):
    return cfg.reading.spec(
        gold_check=gold_check(cfg.grader, cfg.grader_timeout),
        prompt_check=_prompt_check(cfg),  # rows too long for the model, before any rollout
    )


def _prompt_check(cfg: LabelConfig):
    from pipeline.run.prompt_check import prompt_check

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



# What each schema version changed (for the message that refuses to mix versions in one corpus).
_SCHEMA_CHANGES = {2: "it adds mc_no_answer and counts a continuation with no final answer as incorrect",
                   3: "it adds mc_low, mc_high, first_error_confidence and label_status",
                   4: "an unreadable answer counts as a failure (mc_unreadable), mc_value and its interval follow "
                      "the sampling design, rollout reuse is counted exactly (mc_reused, mc_deep_*), and "
                      "first_error_confidence comes from a model fitted to the whole version"}


def base_version(cfg: LabelConfig, manifest: dict | None, identity: str) -> dict | None:
    """The version whose shards the new one builds on: ``manifest`` (the committed version found, None: a new
    corpus; ``identity``: ``cfg.identity()``), or None to start afresh (``--overwrite`` over another configuration or schema version)."""
    base = manifest
    if manifest is not None and manifest.get("identity") != identity:
        if not cfg.overwrite:
            diff = identity_diff(manifest.get("identity_fields", {}), cfg.identity_dict())
            raise ConfigError(
                f"{cfg.output} holds a corpus labeled with a different configuration ({diff}). Labels made "
                "with different settings must not be mixed: use another --output, or pass --overwrite to "
                "start a new corpus version there (the old versions stay readable until `mcprm prune`)."
            )
        log.warning("--overwrite: starting a new corpus version with the new configuration at %s", cfg.output)
        base = None
    old_schema = int(manifest.get("schema_version") or 1) if manifest is not None else SCHEMA_VERSION
    if base is not None and old_schema != SCHEMA_VERSION:
        # Shards of different schema versions are never mixed in one version: their columns differ, and
        # so does what mc_value counts (schema 1 left "no final answer" continuations out of it).
        if not cfg.overwrite:
            raise ConfigError(
                f"{cfg.output} holds a corpus written with schema version {old_schema}; this mcprm writes "
                f"version {SCHEMA_VERSION} ("
                + ("; ".join(_SCHEMA_CHANGES[v] for v in range(old_schema + 1, SCHEMA_VERSION + 1)
                             if v in _SCHEMA_CHANGES) or "other columns") + "), and the "
                "two cannot be mixed in one corpus version. Use another --output, or pass --overwrite to "
                "relabel everything as a new corpus version there (the old versions stay readable until "
                "`mcprm prune`)."
            )
        log.warning("--overwrite: relabeling the schema-%d corpus at %s as a new schema-%d version", old_schema,
                    cfg.output, SCHEMA_VERSION)
        base = None
    return base


def identity_diff(old: dict, new: dict) -> str:
    """What differs between two configurations (``identity_fields``), in words."""
    changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "; ".join(changed[:6]) or "unknown difference"
