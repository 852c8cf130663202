"""The resume phase of ``label()``: write the plan, or take over the plan of an unfinished run of the same work (a
killed run) and its finished shards, each verified in full before it is adopted; an unfinished run of other work
is discarded (or, over a committed corpus made with other settings, refused)."""

from __future__ import annotations

import json
import logging

from pipeline.config import ConfigError
from pipeline.run.plan import Run, identity_diff
from pipeline.run.staging import STAGED, staged_keys, staged_names
from pipeline.storage.store import CorpusStore, Fenced

log = logging.getLogger("mcprm")


def resume_run(run: Run) -> None:
    """Write the plan, or take over the plan of an unfinished run of the same work and its finished shards."""
    from pipeline.faults import fault_point

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
    for name in names:
        store.delete(f"{vdir}/{STAGED}/{name}.parquet")


def resume_shards(store: CorpusStore, plan: dict, version: int, owner: str | None, committed: int) -> dict[int, dict]:
    """Finished shards of an unfinished run, each verified in full against its checksum and the keys of its
    staged file (else relabeled), and adopted under this owner's name (``kept_shard``). Looked for in this
    version's folder and in those of numbers fenced since the committed version (a takeover from a run that
    may still be running claims its number: its finished work is in that number's folder)."""
    from pipeline.storage.integrity import kept_shard

    vdir = store.version_dir(version)
    found: dict[int, list[str]] = {}
    for v in range(version, committed, -1):
        if v != version:  # a fenced number's folder: only the same work (identity) is adopted
            try:
                other = store.read_json(f"{store.version_dir(v)}/_plan.json")
            except RuntimeError:
                other = None
            if not other or other.get("identity") != plan["identity"]:
                continue
        for i, rels in store.shard_files(v).items():
            found.setdefault(i, []).extend(rels)
    done: dict[int, dict] = {}
    for sh in plan["shards"]:
        rels = found.get(sh["shard"])
        if not rels:
            continue
        keys = staged_keys(store, vdir, sh)
        into = store.shard_rel(Fenced(version, owner), sh["shard"]) if owner else None
        for rel in rels:
            got = kept_shard(store, rel, keys, into=into)
            if got is not None:
                done[sh["shard"]] = dict(got, shard=sh["shard"])
                break
    return done
