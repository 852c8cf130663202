"""Files in a corpus's version folders that no committed version records: what a killed, retried or fenced
attempt wrote and nobody will read.

A version folder of a committed number (``data/vNNNNN``) should hold exactly the shards its version records
(and their checksum sidecars): a reader that globs ``data/**/*.parquet`` (polars, ``datasets``, Spark) reads
every file there, and would read the rows of an uncommitted shard too. The run that commits a version removes
the leftovers of its own attempts from its folder and from the folders of the numbers fenced since the last
commit (:func:`remove_after_commit`); one that lands later (a killed run's Ray task still finishing) is named by
``mcprm verify`` and removed by ``mcprm prune`` (:func:`find`). Folders of numbers above the current version (an
unfinished run's plan, staged input and finished shards, kept for its resume) are never touched.
"""

from __future__ import annotations

import contextlib
import posixpath

from pipeline.storage.store import STAGED, CorpusStore, sidecar_rel
from pipeline.storage.versions import read_version


def recorded_paths(store: CorpusStore, versions: list[int] | None = None) -> set[str]:
    """The shard files (and their sidecars) that the intact version files ``versions`` (default: all) record."""
    out: set[str] = set()
    for v in store.versions() if versions is None else versions:
        m = read_version(store, v)
        for sh in (m or {}).get("shards", []):
            out.add(sh["path"])
            out.add(sidecar_rel(sh["path"]))
    return out


def _folder_files(store: CorpusStore, number: int) -> list[str]:
    """Every file under ``data/vNNNNN`` (relative paths), the staged input's too."""
    vdir = store.version_dir(number)
    if not store.local:
        store.fs.invalidate_cache()
    try:
        names = store.fs.ls(store.path(vdir), detail=True)
    except FileNotFoundError:
        return []
    out = []
    for e in names:
        name = posixpath.basename(e["name"].rstrip("/"))
        if e.get("type") == "directory":
            if name == STAGED:
                try:
                    out.extend(f"{vdir}/{STAGED}/{posixpath.basename(g)}"
                               for g in store.fs.ls(store.path(vdir, STAGED), detail=False))
                except FileNotFoundError:
                    pass
            continue
        out.append(f"{vdir}/{name}")
    return sorted(out)


def _numbers(store: CorpusStore) -> list[int]:
    try:
        names = store.fs.ls(store.path("data"), detail=False)
    except FileNotFoundError:
        return []
    out = []
    for d in names:
        b = posixpath.basename(d.rstrip("/"))
        if b.startswith("v") and b[1:].isdigit():
            out.append(int(b[1:]))
    return sorted(out)


def find(store: CorpusStore, current: int, recorded: set[str] | None = None) -> list[str]:
    """Every file in the version folders of numbers up to ``current`` (the current version) that no version file
    records: uncommitted shards and their sidecars, temporary files of killed writes, a committed run's plan or
    staged input (a kill between its commit and their removal), whatever a fenced owner wrote."""
    recorded = recorded_paths(store) if recorded is None else recorded
    return [rel for n in _numbers(store) if n <= current for rel in _folder_files(store, n) if rel not in recorded]


def remove_after_commit(store: CorpusStore, manifest: dict, committed_before: int) -> list[str]:
    """After the version ``manifest`` is committed (by this run, which still holds the lock): remove what it does
    not record from its folder and from the folders of the numbers between the version committed before it
    (``committed_before``) and it (fenced numbers: an earlier owner's unfinished work, taken over by copying; no
    older version records a file there). Returns what was removed."""
    version = manifest["version"]
    recorded = {p for sh in manifest["shards"] for p in (sh["path"], sidecar_rel(sh["path"]))}
    gone = []
    for n in range(committed_before + 1, version + 1):
        for rel in _folder_files(store, n):
            if rel not in recorded:
                store.delete(rel)
                gone.append(rel)
    for n in range(committed_before + 1, version + 1):  # a folder left empty (a fenced number's) goes too
        for sub in (f"{store.version_dir(n)}/{STAGED}", store.version_dir(n)):
            try:
                if store.local and not store.fs.ls(store.path(sub), detail=False):
                    store.fs.rmdir(store.path(sub))
            except (FileNotFoundError, OSError):
                pass
    return gone


def remove_after_lost_lock(store: CorpusStore, number: int, owner: str) -> list[str]:
    """What a run that lost its lock removes as it stops, of ``data/vNNNNN`` (its number): the shard files (and
    sidecars) of its own attempts, whose names carry its owner id (a successor never records another owner's
    file: it copies what it adopts). Once that number is taken by a version file (its successor's commit, or the
    fence that stopped this run) nobody resumes from the folder: its plan and staged input go too, and of a
    committed number everything the version does not record. Otherwise (a successor resuming this very number,
    this run having looked dead) the plan and staged input are the successor's now and stay."""
    taken = store.exists(f"versions/v{number:05d}.json")
    committed = read_version(store, number) if taken else None
    recorded = {p for sh in (committed or {}).get("shards", []) for p in (sh["path"], sidecar_rel(sh["path"]))}
    gone = []
    for rel in _folder_files(store, number):
        b = posixpath.basename(rel)
        own = b.startswith("part-") and f".{owner}." in b and f"/{STAGED}/" not in rel
        if (own or taken) and rel not in recorded and (own or committed is not None or b == "_plan.json"
                                                       or f"/{STAGED}/" in rel):
            store.delete(rel)
            gone.append(rel)
    return gone


def after_lost_lock(store: CorpusStore, number: int, lock, e: BaseException) -> BaseException | None:
    """A run writing version ``number`` under ``lock`` fails with ``e``: if its lock was taken over meanwhile,
    what it wrote is removed (:func:`remove_after_lost_lock`), and the error to raise instead is returned, the
    lost lock (``LockLost``), when ``e`` comes of the takeover (its successor removed what this run was writing or
    reading). None: raise ``e`` as it is (the lock is still held, or the storage itself fails)."""
    from pipeline.storage.lock import LockLost

    if not isinstance(e, Exception):  # Ctrl-C, a kill: nothing is touched on the way out
        return None
    try:
        if lock.still_held():
            return None
    except Exception:  # noqa: BLE001 - the storage fails: the run's own error says so
        return None
    with contextlib.suppress(OSError):
        remove_after_lost_lock(store, number, lock.owner)
    if isinstance(e, LockLost):
        return None
    try:
        lock.check()
    except LockLost as lost:
        return lost
    return None
