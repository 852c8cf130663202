"""A refresh over a version with damaged shards (:func:`pipeline.storage.integrity.verified_base` leaves them out
and records them in ``base["_damaged"]``): their rows the input still holds are labeled again, and a new version
that would lose the others is refused, naming them, unless ``--drop-damaged``; then its manifest says what it
left out (``dropped``, ``counts.dropped``), never silently."""

from __future__ import annotations

import logging

from pipeline.storage.errors import ShardError

log = logging.getLogger("mcprm")


def damaged_row_keys(base: dict | None) -> set[str]:
    """The content keys of the rows of ``base``'s damaged shards, where known (a sidecar or a key column)."""
    return {k for d in (base or {}).get("_damaged", []) for k in (d["keys"] or [])}


def dropped_rows(store, damaged: list[dict], seen: set[str], existing, output: str, drop: bool) -> list[dict]:
    """The rows of the damaged shards (``damaged``: ``base["_damaged"]``) that the new version would not hold:
    neither the input (``seen``: their keys it holds) nor an intact shard (``existing``: a sorted numpy uint64
    array of keys) has them. Refused with a :class:`ShardError` naming them, unless ``drop``
    (``--drop-damaged``); then they are what the new manifest records under ``dropped``
    (:func:`record_dropped`)."""
    import numpy as np

    lost: list[dict] = []
    for d in damaged:
        sh, keys = d["shard"], d["keys"]
        entry = {"path": sh["path"], "version": sh.get("version"), "rows": int(sh.get("rows", 0))}
        if keys is None:  # nothing tells which rows it held: the input cannot be shown to hold them
            lost.append(dict(entry, keys=None, missing=entry["rows"]))
            continue
        elsewhere = set()
        if existing is not None and len(existing):
            nums = np.fromiter((int(k, 16) for k in keys), np.uint64, len(keys))
            elsewhere = {k for k, hit in zip(keys, np.isin(nums, existing)) if hit}
        missing = [k for k in keys if k not in seen and k not in elsewhere]
        if missing:
            lost.append(dict(entry, keys=missing, missing=len(missing)))
    if not lost:
        return []
    n = sum(x["missing"] for x in lost)
    where = "; ".join(
        f"{store.uri(x['path'])} (version {x['version']}): "
        + (f"{x['missing']} of its {x['rows']} rows, keys {', '.join(x['keys'][:5])}"
           + (", ..." if len(x["keys"]) > 5 else "") if x["keys"] is not None
           else f"its {x['rows']} rows (unreadable, and no checksum sidecar lists its keys)")
        for x in lost)
    if not drop:
        raise ShardError(
            f"{n} rows of damaged shards of {output} are not in the input any more, so the new version "
            f"would not hold them: {where}. Nothing was labeled or committed. Restore the damaged files from a "
            "backup, or add the input that holds those rows, then rerun; or pass --drop-damaged to commit the new "
            "version without them (recorded in its manifest under `dropped`). `mcprm verify` lists what is "
            "damaged.")
    log.warning("--drop-damaged: the new version leaves out %d rows of damaged shards: %s", n, where)
    return lost


def record_dropped(manifest: dict, dropped: list[dict]) -> None:
    """Say in the new version's manifest which rows of damaged shards it leaves out (``--drop-damaged``)."""
    if dropped:
        manifest["dropped"] = dropped
        manifest["counts"]["dropped"] = sum(x["missing"] for x in dropped)
