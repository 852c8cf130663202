"""Fault injection for the chaos tests: ``MCPRM_FAULT=point:n`` SIGKILLs this process the n-th time it
reaches ``point`` (``mid-write``, ``sidecar-written``, ``shard-written``, ``plan-written``, ``version-written``,
``manifest-written``, ...). Unset (always, outside tests), :func:`fault_point` is one dict lookup."""

from __future__ import annotations

import os
import signal

_counts: dict[str, int] = {}


def fault_point(point: str, what: str = "") -> None:
    spec = os.environ.get("MCPRM_FAULT")
    if not spec:
        return
    name, _, n = spec.partition(":")
    if name != point:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if _counts[point] == int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)
