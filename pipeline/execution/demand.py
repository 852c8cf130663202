"""How many shards a Ray worker is given at once: raised from the demand it is measured to put on its engines.

A GPU engine runs a few thousand sequences at once, and a shard of an adaptive strategy keeps only one or two
continuations per solution in flight (a binary search), per-step K x steps, and a hard problem more than an easy
one: so the count is measured, not assumed. A worker starts with its backend's count (vLLM: 2) and is raised in
proportion to its engines' capacity over the continuations it kept in flight (:func:`shards_for_demand`), never
lowered, at most its backend's most. The measure is a poll of the worker's demand every few seconds while its
shards run (:class:`ShardsAtOnce`), not a finished shard's: a binary search's shard ends only with its slowest
solution, so a count raised as shards finish leaves the engine starved until the first one does.

Once a worker states its capacity (its first poll's answer), it holds at least the shards whose solutions, one
continuation each, fill its engines (:func:`filling_shards`): a binary search keeps about one per solution in flight,
so that count fills the engines from the first poll instead of after several raises (on one H200 the run with
every shard at once from the start was the fastest measured), and drawing ahead (``--tail-fill``) then fills the
free slots with later waves of many live solutions rather than with the speculation of a few. A strategy that keeps
more than one continuation per solution in flight (per-step) holds more shards than its engines need: their
requests wait in the engines' queues, which costs memory and, on a killed run, shards redone, not GPU time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

POLL_S = 5.0  # seconds between two polls of one worker's demand while it runs fewer shards than its most


def shards_for_demand(held: int, in_flight: float, capacity: int, most: int) -> int:
    """Shards a worker should hold at once, given that while it held ``held`` it kept ``in_flight`` continuations
    in flight on average against engines that run ``capacity`` at once: enough to fill them at the same demand per
    shard, never fewer than now, at most ``most``. Continuations beyond the capacity wait in the engine's queue,
    which costs the worker's memory only, and a run killed loses at most the shards in flight."""
    if in_flight >= capacity:
        return held
    return max(held, min(most, math.ceil(held * capacity / max(in_flight, 1.0))))


def filling_shards(capacity: int, shard_size: int, most: int) -> int:
    """Shards of ``shard_size`` solutions whose solutions, one continuation each, fill engines that run
    ``capacity`` sequences at once; at most ``most`` (0 without a shard size)."""
    if shard_size <= 0 or capacity <= 0:
        return 0
    return min(most, math.ceil(capacity / shard_size))


class ShardsAtOnce:
    """The shards each of ``n`` workers is given at once (``held``), starting at ``start``, raised up to ``most``.

    The executor tells it every change of a worker's load (:meth:`load_is`), asks which workers to poll
    (:meth:`due`) and hands it each poll's answer (:meth:`polled`). A poll's answer is the worker's mean in flight
    since its previous poll; the shards it ran over that window are taken as the fewest it ran at any time in it,
    which can only overstate the demand per shard: a raise never goes past what the measure supports."""

    def __init__(self, n: int, start: int, most: int, poll_s: float = POLL_S, shard_size: int = 0):
        self.held = [start] * n
        self.most = max(start, most)
        self.poll_s = poll_s
        self.shard_size = shard_size  # solutions per shard: the floor of filling_shards (0: no floor)
        self._fewest: list[int | None] = [None] * n  # fewest shards running since the last answer (None: none yet)
        self._asked_at: list[float | None] = [None] * n
        self._asking = [False] * n
        self._unmeasured = [False] * n  # its backend states no capacity: nothing to poll

    def up(self, a: int) -> None:
        """Worker ``a`` is up (its engine loaded): it starts at the highest count the others reached, as a run's
        workers run the same engines on the same work, so their measure holds for it (engines on one GPU start one
        at a time, and the last one up would otherwise start starved while the first hold the rest of the run)."""
        self.held[a] = max(self.held)

    def load_is(self, a: int, shards: int) -> None:
        """Worker ``a`` now runs ``shards`` shards."""
        f = self._fewest[a]
        self._fewest[a] = shards if f is None else min(f, shards)

    def due(self, now: float, load: Sequence[int], up: Sequence[bool]) -> list[int]:
        """The workers to poll now (each marked as asked): up, running shards, below their most, not waiting for an
        answer, and ``poll_s`` seconds past their previous poll (the first: past the first time they were seen
        running shards, so the first window holds a measure)."""
        out = []
        for a, h in enumerate(self.held):
            if not (up[a] and load[a] > 0 and h < self.most and not self._asking[a] and not self._unmeasured[a]):
                continue
            last = self._asked_at[a]
            if last is None:  # the first window starts here: the worker's first shards went out together
                self._asked_at[a], self._fewest[a] = now, load[a]
            elif now - last >= self.poll_s:
                self._asking[a], self._asked_at[a] = True, now
                out.append(a)
        return out

    def polled(self, a: int, demand: dict | None, load_now: int) -> bool:
        """Worker ``a``'s answer (``in_flight_mean``, ``seqs_capacity``; None: the poll failed); ``load_now``: the
        shards it runs now (the next window's start). True where its count rose."""
        self._asking[a] = False
        fewest, self._fewest[a] = self._fewest[a], load_now
        if demand is None:
            return False
        if not demand.get("seqs_capacity"):
            self._unmeasured[a] = True
            return False
        filled = self._raise(a, filling_shards(int(demand["seqs_capacity"]), self.shard_size, self.most))
        if not fewest or demand.get("in_flight_mean") is None:
            return filled
        return self._raise(a, shards_for_demand(fewest, demand["in_flight_mean"], demand["seqs_capacity"],
                                                self.most)) or filled

    def _raise(self, a: int, want: int) -> bool:
        if want > self.held[a]:
            self.held[a] = want
            return True
        return False
