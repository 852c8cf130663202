"""Live progress of a labeling run: solutions done of the total, rollouts, generated tokens per second and an
ETA, from per-solution reports of the workers (not only when a shard finishes).

:class:`ProgressState` is the arithmetic alone (no clock, no terminal: times are given), so it is tested as a
unit. Counts are kept per shard: a worker's partial counts for a shard are replaced by the shard's final counts
when it finishes (a retried shard is never counted twice). The ETA is the remaining solutions at a smoothed
solution rate: an exponentially weighted count of the solutions finished since the first one (time constant
``tau``), corrected for its warm-up as Adam corrects its moments, so a slow start (the model load, Ray actors
starting, a first burst of solutions labeled without rollouts) does not make the ETA jump, and bursts of
solutions finishing together do not make it swing. :class:`LiveProgress` shows it: a rich bar on a terminal,
else a plain line every ``every_s`` seconds and the final one once.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

TAU_S = 60.0  # the solution rate's memory: long enough to span bursts, short enough to follow a change of pace
MIN_ETA_SOLUTIONS = 2  # solutions finished after the first before an ETA is shown ("estimating" until then)


@dataclass
class ProgressState:
    total: int
    t0: float = 0.0  # when labeling started (after the model load)
    tau: float = TAU_S
    _shards: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # shard -> (solutions, rollouts, tokens)
    t_first: float | None = None  # when the first solution was reported done
    _t_last: float = 0.0
    _done_last: int = 0
    _since_first: int = 0  # solutions finished after the first report
    _acc: float = 0.0  # exponentially weighted count of solutions finished since t_first

    def solution_done(self, shard: int, rollouts: int, tokens: int, now: float | None = None) -> None:
        """One more solution of ``shard`` labeled by a worker (partial count), at ``now``."""
        s, r, t = self._shards.get(shard, (0, 0, 0))
        self._shards[shard] = (s + 1, r + rollouts, t + tokens)
        self._tick(now)

    def shard_done(self, shard: int, solutions: int, rollouts: int, tokens: int, now: float | None = None) -> None:
        """``shard`` finished: its final counts replace whatever partial counts were reported."""
        self._shards[shard] = (solutions, rollouts, tokens)
        self._tick(now)

    def _tick(self, now: float | None) -> None:
        if now is None:
            return
        done = self.done
        if self.t_first is None:
            if done > 0:  # the clock of the rate starts at the first report: a load or a first burst is not pace
                self.t_first, self._t_last, self._done_last = now, now, done
            return
        new = done - self._done_last
        self._acc = max(0.0, self._acc * math.exp(-max(0.0, now - self._t_last) / self.tau) + new)
        self._since_first += max(0, new)
        self._t_last, self._done_last = max(now, self._t_last), done

    @property
    def done(self) -> int:
        return min(self.total, sum(s for s, _, _ in self._shards.values()))

    @property
    def rollouts(self) -> int:
        return sum(r for _, r, _ in self._shards.values())

    @property
    def tokens(self) -> int:
        return sum(t for _, _, t in self._shards.values())

    def rates(self, now: float) -> tuple[float, float]:
        """(rollouts per second, generated tokens per second) since labeling started."""
        el = now - self.t0
        return (self.rollouts / el, self.tokens / el) if el > 0 else (0.0, 0.0)

    def solution_rate(self, now: float) -> float | None:
        """Solutions per second, smoothed (see the module docstring); None before there is a pace to tell."""
        if self.t_first is None or self._since_first < MIN_ETA_SOLUTIONS:
            return None
        span = now - self.t_first
        if span <= 0:
            return None
        acc = self._acc * math.exp(-max(0.0, now - self._t_last) / self.tau)
        return acc / (self.tau * (1.0 - math.exp(-span / self.tau)))

    def eta(self, now: float) -> float | None:
        """Seconds left at the smoothed solution rate; None until a rate is known."""
        if self.done >= self.total:
            return 0.0
        rate = self.solution_rate(now)
        if not rate:
            return None
        return (self.total - self.done) / rate

    def info(self, now: float, loading: bool = False) -> str:
        """What follows "done/total solutions": the phase before a first solution, else counts, rate, ETA."""
        if loading:
            return "loading the model"
        if self.done == 0:
            return "starting (the first solutions are in progress)"
        _, t = self.rates(now)
        eta = self.eta(now)
        done_so_far = (f"{self.rollouts:,} rollouts, {t:,.0f} tok/s" if self.rollouts
                       else "no rollouts needed yet")  # e.g. solutions trusted as correct
        return f"{done_so_far}, ETA " + ("estimating" if eta is None else _duration(eta))

    def line(self, now: float, loading: bool = False) -> str:
        return f"{self.done:,}/{self.total:,} solutions, " + self.info(now, loading)


def _duration(s: float) -> str:
    s = max(0, round(s))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class LiveProgress:
    """A rich progress bar on a terminal, refreshed from every finished solution; plain lines (every ``every_s``,
    and the final one once) when the output is not a terminal; nothing when disabled. "loading the model" until
    :meth:`start`, "starting" until a first solution is done, then counts, tok/s and the ETA."""

    def __init__(self, total: int, enabled: bool, every_s: float = 10.0, clock=time.perf_counter):
        self.clock = clock
        self.state = ProgressState(total, t0=clock())
        self.total = total
        self.every_s = every_s
        self.last = self.state.t0
        self.loading = True
        self.bar = None
        self.enabled = enabled
        self.final_shown = False  # piped: the final line, once (close())
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("labeling"), BarColumn(), MofNCompleteColumn(), TextColumn("solutions"),
                TextColumn("{task.fields[info]}"), transient=False, console=Console(stderr=True),
            )
            self.task = self.bar.add_task("label", total=total, info=self.state.info(self.state.t0, True))
            self.bar.start()

    def start(self) -> None:
        """Labeling starts now (after the model load): rates count from here."""
        self.state.t0 = self.last = self.clock()
        self.loading = False
        self._show()

    def _show(self) -> None:
        now = self.clock()
        st = self.state
        if self.bar is not None:
            self.bar.update(self.task, completed=st.done, info=st.info(now, self.loading))
            return
        if self.enabled and st.done < self.total and now - self.last >= self.every_s:
            self.last = now
            print(f"[mcprm] {st.line(now, self.loading)}", file=sys.stderr, flush=True)

    def solution(self, shard: int, rollouts: int, tokens: int) -> None:
        self.state.solution_done(shard, rollouts, tokens, now=self.clock())
        self._show()

    def shard(self, res: dict) -> None:
        self.state.shard_done(res["shard"], res["rows"], res["rollouts"], res["rollout_tokens"], now=self.clock())
        self._show()

    def close(self) -> None:
        """The end of labeling: the bar stops; piped, the final line is printed once (with the last shard's final
        counts), and only when every solution is done (not after an error)."""
        if self.bar is not None:
            self.bar.stop()
        elif self.enabled and not self.final_shown and self.state.done >= self.total:
            self.final_shown = True
            print(f"[mcprm] {self.state.line(self.clock())}", file=sys.stderr, flush=True)
