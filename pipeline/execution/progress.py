"""Live progress of a labeling run: solutions done of the total, rollouts, generated tokens per second and an
ETA, from per-solution reports of the workers (not only when a shard finishes).

:class:`ProgressState` is the arithmetic alone (no clock, no terminal: times are given), so it is tested as a
unit. Counts are kept per shard: a worker's partial counts for a shard are replaced by the shard's final counts
when it finishes (a retried shard is never counted twice).

The ETA is the remaining solutions at the mean solution rate since the first solution was reported (so a model
load or Ray actors starting are not counted as pace), shown only once ``ETA_MIN_SHARE`` of the solutions (at
most ``ETA_MIN_SOLUTIONS``) are done and ``ETA_MIN_SECONDS`` have passed; "estimating" until then. Measured on
the bundled sample's default run (issue 25, BENCHMARKS.md): the mean rate from the start showed 92 s at 11 s
and 296 s at 37 s (true: 282, 255 s), because each shard's solutions with a correct answer are labeled first
and at once; withheld that early, the shown ETA is within 12% of the true time left on average (29% at worst)
and never grows by more than 9% from one line to the next. An exponentially weighted rate (60 s) was tried
and measured worse (47% on average): a shard's burst of free solutions then dominates it.
:class:`LiveProgress` shows it: a rich bar on a terminal, else a plain line every ``every_s`` seconds and the
final line once.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

ETA_MIN_SHARE = 0.1  # of the solutions done before an ETA is shown ...
ETA_MIN_SOLUTIONS = 200  # ... or this many, whichever is fewer
ETA_MIN_SECONDS = 30.0  # and this long since the first solution was reported


@dataclass
class ProgressState:
    total: int
    t0: float = 0.0  # when labeling started (after the model load)
    _shards: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # shard -> (solutions, rollouts, tokens)
    t_first: float | None = None  # when the first solution was reported done
    _done_first: int = 0  # solutions done at that report

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
        if now is not None and self.t_first is None and self.done > 0:
            self.t_first, self._done_first = now, self.done  # the pace is timed from here

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
        """Solutions per second since the first report; None until enough is done to tell (module docstring)."""
        if self.t_first is None:
            return None
        span, n = now - self.t_first, self.done - self._done_first
        if span < ETA_MIN_SECONDS or n <= 0 or self.done < min(ETA_MIN_SHARE * self.total, ETA_MIN_SOLUTIONS):
            return None
        return n / span

    def eta(self, now: float) -> float | None:
        """Seconds left at the solution rate; None until a rate is known."""
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
