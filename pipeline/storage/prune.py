"""``mcprm prune``: drop old corpus versions and the shards only they used.

Versions share shards (a refresh lists the older shards again), so pruning removes the manifests of old
versions and only the shard files no kept version lists. An unfinished run's folder (a version above the
current one) is left alone, and so are fences (``pipeline.storage.store``); leftover temporary files from
killed writes, shards of attempts no manifest records (a retried task's other attempt), and the staged input of committed
runs (``data/vN/_staged/``, left by a kill between a commit and their removal) are removed. Runs under the output
lock, so it never races a refresh.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from pipeline.storage.lock import corpus_lock
from pipeline.storage.store import STAGED, CorpusStore


@dataclass
class PruneResult:
    kept_versions: list[int]
    removed_versions: list[int]
    removed_files: list[str] = field(default_factory=list)


def prune(url: str, keep: int = 1, dry_run: bool = False) -> PruneResult:
    if keep < 1:
        raise ValueError("--keep must be at least 1 (the current version is always kept)")
    store = CorpusStore(url)
    with corpus_lock(store):
        current = store.manifest()
        if current is None:
            raise FileNotFoundError(f"{url} is not an mcprm corpus (no manifest.json)")
        cur = current["version"]
        # fences (numbers claimed at a takeover) are no versions and stay: a number is never used twice
        versions = [v for v in store.versions() if v <= cur and not store.is_fence(v)]
        kept = sorted(set(versions[-keep:]) | {cur})
        removed = [v for v in versions if v not in kept]
        referenced: set[str] = set()
        for v in kept:
            m = current if v == cur else store.version_manifest(v)
            referenced.update(s["path"] for s in (m or {}).get("shards", []))
        files: list[str] = []
        try:
            vdirs = store.fs.ls(store.path("data"), detail=False)
        except FileNotFoundError:
            vdirs = []
        for d in vdirs:
            name = posixpath.basename(d.rstrip("/"))
            if not (name.startswith("v") and name[1:].isdigit()) or int(name[1:]) > cur:
                continue  # not ours, or an unfinished run
            for f in store.fs.ls(d, detail=False):
                rel = f"data/{name}/{posixpath.basename(f)}"
                if posixpath.basename(f.rstrip("/")) == STAGED:  # a committed run's staged input (a kill came
                    # between its commit and their removal): never read again
                    files.extend(f"{rel}/{posixpath.basename(g)}" for g in store.fs.ls(f, detail=False))
                    continue
                if rel in referenced:
                    continue
                orphan_sum = rel.endswith(".sum.json") and rel[: -len(".sum.json")] + ".parquet" not in referenced
                if rel.endswith(".parquet") or ".tmp-" in rel or rel.endswith("_plan.json") or orphan_sum:
                    files.append(rel)
        for v in removed:
            files.append(f"versions/v{v:05d}.json")
            if store.exists(f"rejects/v{v:05d}.jsonl"):
                files.append(f"rejects/v{v:05d}.jsonl")
        if not dry_run:
            for rel in files:
                store.delete(rel)
        return PruneResult(kept, removed, files)
