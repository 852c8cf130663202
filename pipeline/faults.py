"""Fault injection for the chaos tests: ``MCPRM_FAULT=point:n`` SIGKILLs this process the n-th time it
reaches ``point`` (``locked``, ``plan-written``, ``judge-part-written``). Unset (always, outside tests),
:func:`fault_point` is one dict lookup. The storage itself has no hooks: kills and lock takeovers inside its
writes go through the fsspec filesystem it writes with (``tests/integration/fs_seam.py``).

``MCPRM_FAULT_RAISE=point:what`` makes :func:`fault_raise` raise a ``ValueError`` when it reaches ``point`` for
``what`` (e.g. ``label-solution:<solution id>``: the worker fails on that one row), to test how an error
raised inside a worker reaches the user."""

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


def fault_raise(point: str, what: str = "") -> None:
    spec = os.environ.get("MCPRM_FAULT_RAISE")
    if not spec:
        return
    name, _, target = spec.partition(":")
    if name == point and target == what:
        raise ValueError(f"injected fault at {point} for {what!r}")
