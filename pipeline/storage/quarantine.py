"""Rows the labeling workers failed on with ``--skip-bad`` (each shard's result says which, and why): quarantined
to ``rejects/vNNNNN.jsonl`` beside the rows input validation rejected, once each, and counted as rejected."""

from __future__ import annotations

import json
import logging

log = logging.getLogger("mcprm")


def quarantine(store, version: int, results: dict[int, dict]) -> int:
    """Add the rows the workers rejected (``results``: every shard's result, its ``rejects``) to version
    ``version``'s rejects file, rewritten whole in one step as the validation rejects were (a row already
    there is not repeated). Returns how many rows the workers rejected."""
    found = [r for i in sorted(results) for r in results[i].get("rejects") or []]
    if not found:
        return 0
    rel = f"rejects/v{version:05d}.jsonl"
    try:
        before = store.read_bytes(rel)
    except FileNotFoundError:
        before = b""
    known = set()
    for line in before.splitlines():
        try:
            known.add(json.loads(line).get("key"))
        except (ValueError, AttributeError):
            pass
    new = [r for r in found if r.get("key") not in known or r.get("key") is None]
    lines = b"".join(json.dumps({k: v for k, v in r.items() if k != "detail"}, ensure_ascii=False).encode() + b"\n"
                     for r in new)
    store.write_bytes(rel, before + lines)  # whole, in one step, as the validation rejects were
    for r in found:
        log.warning("%s: quarantined to %s (--skip-bad): %s", r["where"], store.uri(rel), r["reason"])
    return len(found)
