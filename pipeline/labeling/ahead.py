"""Drawing a probe's later waves ahead: the end of a job on a GPU engine.

A first-success probe (binary-search, adaptive: waves until the first success or K) waits one round per wave.
At the end of a job a few solutions' chains of rounds decide its length while the engine has room: there the
scheduler draws a probe's later waves (:attr:`pipeline.labeling.strategies.Probe.later`) in the same round and
keeps only what the schedule would have drawn, the waves up to the first with a success
(:func:`keep_schedule`). Each wave is its own request with the seed and size the plain schedule gives that wave
(``Scheduler._requests``), so a wave drawn ahead is the very wave the plain schedule would draw a round later:
the labels, the first wave's unbiased ``mc_value`` and the intervals of the first-success design are exactly
the plain schedule's, whatever the engine's load when the probe was sent (which decides whether it draws
ahead). The dropped continuations cost tokens that an engine with room generates almost free, and are not
draws of their step (a later probe of it samples the same seeds again, as the plain schedule would). Nothing
is cancelled: every continuation drawn runs to its end, and what is kept depends on the outcomes of whole
waves only, never on which continuation finished first (a cancelled wave would favour short continuations).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.labeling.strategies import Probe

# width of a bucket of :meth:`SequenceLoad.histogram`, in continuations in flight
LOAD_BUCKET = 32


class SequenceLoad:
    """Continuations submitted to one engine and not finished, over every scheduler that shares it (the
    shards a worker labels at once): what ``Scheduler.tail_fill`` compares with.

    It also keeps how long each level of load lasted (:meth:`histogram`, from the first submission on): the demand
    the worker put on its engine. An engine that runs at most L sequences at once is starved for the time the
    worker had fewer than L in flight, whatever the engine's own speed; a run's manifest reports that share
    (:func:`demand_summary`), which is how a GPU left idle by too little work in flight is told from one left idle
    by the engine's host side."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()
        self._since: float | None = None  # when the load last changed (None: nothing submitted yet)
        self._seconds: dict[int, float] = {}  # bucket (load // LOAD_BUCKET) -> seconds spent at that load

    def add(self, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            if self._since is not None:
                b = self._n // LOAD_BUCKET
                self._seconds[b] = self._seconds.get(b, 0.0) + (now - self._since)
            self._since = now
            self._n += n

    @property
    def value(self) -> int:
        return self._n

    def histogram(self, until_now: bool = False) -> dict[str, float]:
        """Seconds spent at each load, by the bucket's lowest load (keys as strings: the manifest is JSON), up to
        the last change (the idle time after a worker's last shard is not the run's); ``until_now``: up to now, the
        current load's time so far included (a window of a running worker in which the load did not change)."""
        with self._lock:
            sec = dict(self._seconds)
            if until_now and self._since is not None:
                b = self._n // LOAD_BUCKET
                sec[b] = sec.get(b, 0.0) + (time.monotonic() - self._since)
            return {str(b * LOAD_BUCKET): round(s, 3) for b, s in sorted(sec.items())}


def histogram_since(now: dict[str, float], was: dict[str, float]) -> dict[str, float]:
    """The seconds ``now`` (a :meth:`SequenceLoad.histogram`) added since ``was`` (an earlier one of the same load),
    bucket by bucket, buckets that gained nothing left out: a warm worker's share of one run."""
    return {k: round(s - was.get(k, 0.0), 3) for k, s in now.items() if s - was.get(k, 0.0) > 0}


def mean_level(hist: dict[str, float]) -> float | None:
    """The time-weighted mean load of a :meth:`SequenceLoad.histogram` (or of :func:`histogram_since`'s part of
    one): low by less than one bucket, as every level is its bucket's lowest. None for no time at all."""
    seconds = sum(float(s) for s in hist.values())
    return sum(int(k) * float(s) for k, s in hist.items()) / seconds if seconds > 0 else None


def demand_summary(histograms: Sequence[dict], capacity: int | None = None) -> dict | None:
    """What ``histograms`` (each worker's :meth:`SequenceLoad.histogram`) say of the demand on the engines: the
    time-weighted mean and quartiles of continuations in flight per worker, and with ``capacity`` (the sequences
    one worker's engines run at once) the share of the time a worker had fewer than that in flight. The levels are
    bucketed (:data:`LOAD_BUCKET`): a level is its bucket's lowest value, so the mean and quantiles are low by less
    than one bucket."""
    total: dict[int, float] = {}
    for h in histograms:
        for k, s in (h or {}).items():
            total[int(k)] = total.get(int(k), 0.0) + float(s)
    seconds = sum(total.values())
    if seconds <= 0:
        return None
    levels = sorted(total)

    def quantile(q: float) -> int:
        acc = 0.0
        for lv in levels:
            acc += total[lv]
            if acc >= q * seconds:
                return lv
        return levels[-1]

    out: dict = {"worker_seconds": round(seconds, 1),
                 "mean_in_flight": round(sum(lv * s for lv, s in total.items()) / seconds, 1),
                 "p10": quantile(0.10), "p50": quantile(0.50), "p90": quantile(0.90), "bucket": LOAD_BUCKET}
    if capacity:
        out["capacity"] = int(capacity)
        # a bucket that straddles the capacity counts as below it: its time was spent partly under the limit
        out["share_below_capacity"] = round(sum(s for lv, s in total.items() if lv < capacity) / seconds, 3)
    return out


def draw_ahead(probes: Sequence[Probe], room: int) -> list[tuple[int, ...]]:
    """The waves each probe draws this round: its own ``n``, then as many of its later waves as fit in ``room``
    continuations beyond the probes' own (probes in order, whole waves only)."""
    room -= sum(p.n for p in probes)
    out = []
    for p in probes:
        take = []
        for w in p.later:
            if w > room:
                break
            take.append(w)
            room -= w
        out.append((p.n, *take))
    return out


def wave_probes(waves: Sequence[tuple[int, ...]]) -> list[int]:
    """The probe of each request of a round, one request per wave (``waves``: per probe), in order."""
    return [k for k, ws in enumerate(waves) for _w in ws]


def join_waves(waves: Sequence[tuple[int, ...]], per_request: Sequence[list]) -> list[list]:
    """The completions of a round's requests (one per wave), joined per probe, its waves in order."""
    out: list[list] = [[] for _ in waves]
    for k, comps in zip(wave_probes(waves), per_request, strict=True):
        out[k].extend(comps)
    return out


@dataclass
class Kept:
    probes: list[Probe]  # one per kept wave (a step's first wave stays its first ProbeResult)
    comps: list[list]  # their completions
    verdict_index: list[int]  # their verdicts: indices into the round's verdicts
    reused: list[tuple]  # reuse credits of kept continuations, renumbered (probe, completion, step, verdict)
    dropped: list[tuple[int, list]]  # (step, completions) drawn ahead and not kept


def keep_schedule(probes: Sequence[Probe], waves: Sequence[tuple[int, ...]], comps_per_probe: Sequence[list],
                  correct: Sequence[bool], reused: Sequence[tuple] = ()) -> Kept:
    """Split each probe's completions into its waves and keep the waves up to the first with a success
    (``correct``: one flag per completion of the round, in order). Reuse credits ``(probe, completion, step,
    verdict)`` of dropped continuations go with them."""
    out = Kept([], [], [], [], [])
    where: dict[tuple[int, int], tuple[int, int]] = {}
    pos = 0
    for k, (p, comps, ws) in enumerate(zip(probes, comps_per_probe, waves, strict=True)):
        start = 0
        for w in ws:
            for ci in range(start, start + w):
                where[(k, ci)] = (len(out.probes), ci - start)
            out.probes.append(Probe(p.step, w))
            out.comps.append(list(comps[start : start + w]))
            out.verdict_index.extend(range(pos + start, pos + start + w))
            start += w
            if any(correct[pos + start - w : pos + start]):
                break
        if start < len(comps):
            out.dropped.append((p.step, list(comps[start:])))
        pos += len(comps)
    out.reused = [(*where[(k, ci)], j, v) for k, ci, j, v in reused if (k, ci) in where]
    return out
