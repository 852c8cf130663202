"""Live progress of a labeling run: solutions done of the total, rollouts, generated tokens per second and an
ETA, from per-solution reports of the workers (not only when a shard finishes).

:class:`ProgressState` is the arithmetic alone (no clock, no terminal: times are given), so it is tested as a
unit. Counts are kept per shard: a worker's partial counts for a shard are replaced by the shard's final counts
when it finishes (a retried shard is never counted twice).

The ETA is grounded in work units, not in solutions: each shard's solutions with a correct answer are labeled
first and at once (no rollouts), so solutions done early overstate the pace, and on a busy machine the slow
rest falls further behind (a shown ETA rose from 4 to 17 minutes before it fell). Once a shard has finished, its
rollouts per solution (a whole shard: the free solutions and the costly ones) estimate the rollouts the
solutions not done yet still need, and the rollout rate since the first report (the engine's pace, the same
for every kind of solution) turns them into time. Until a shard has finished, ``ETA_MIN_SECONDS`` have passed
and ``ETA_MIN_SHARE`` of the solutions (at most ``ETA_MIN_SOLUTIONS``) are done the ETA is "estimating"; a run
whose finished shards needed no rollout at all falls back to the solution rate. Measured on the bundled
sample's default run (BENCHMARKS.md, "the progress ETA on the bundled run"): the mean rate from the start
showed 92 s at 11 s and 296 s at 37 s (true: 282, 255 s); an exponentially weighted rate (60 s) was worse
(47% off on average): a shard's burst of free solutions dominates it.
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
    _rollouts_first: int = 0  # rollouts done at that report
    _finished: set[int] = field(default_factory=set)  # shards whose final counts are in

    def solution_done(self, shard: int, rollouts: int, tokens: int, now: float | None = None) -> None:
        """One more solution of ``shard`` labeled by a worker (partial count), at ``now``."""
        s, r, t = self._shards.get(shard, (0, 0, 0))
        self._shards[shard] = (s + 1, r + rollouts, t + tokens)
        self._tick(now)

    def shard_done(self, shard: int, solutions: int, rollouts: int, tokens: int, now: float | None = None) -> None:
        """``shard`` finished: its final counts replace whatever partial counts were reported."""
        self._shards[shard] = (solutions, rollouts, tokens)
        self._finished.add(shard)
        self._tick(now)

    def _tick(self, now: float | None) -> None:
        if now is not None and self.t_first is None and self.done > 0:
            self.t_first, self._done_first, self._rollouts_first = now, self.done, self.rollouts  # timed from here

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

    def _grounded(self, now: float) -> bool:
        """Enough is known to tell the pace: a shard finished, ``ETA_MIN_SECONDS`` since the first report and
        ``ETA_MIN_SHARE`` of the solutions (at most ``ETA_MIN_SOLUTIONS``) done (module docstring)."""
        return (self.t_first is not None and bool(self._finished) and now - self.t_first >= ETA_MIN_SECONDS
                and self.done > self._done_first and self.done >= min(ETA_MIN_SHARE * self.total, ETA_MIN_SOLUTIONS))

    def solution_rate(self, now: float) -> float | None:
        """Solutions per second since the first report; None until the pace is grounded (module docstring)."""
        if not self._grounded(now):
            return None
        return (self.done - self._done_first) / (now - self.t_first)

    def eta(self, now: float) -> float | None:
        """Seconds left: the rollouts still needed (finished shards' rollouts per solution times the solutions
        not in a finished shard, less those already run for them) at the rollout rate since the first report;
        the solution rate where finished shards needed no rollouts; None until the pace is grounded."""
        if self.done >= self.total:
            return 0.0
        if not self._grounded(now):
            return None
        fin = [self._shards[s] for s in self._finished]
        fin_solutions, fin_rollouts = sum(x[0] for x in fin), sum(x[1] for x in fin)
        rollout_rate = (self.rollouts - self._rollouts_first) / (now - self.t_first)
        if fin_rollouts <= 0 or rollout_rate <= 0:
            rate = self.solution_rate(now)
            return (self.total - self.done) / rate if rate else None
        running = self.rollouts - fin_rollouts  # already run for solutions of shards not finished
        left = (self.total - fin_solutions) * fin_rollouts / max(1, fin_solutions) - running
        return max(0.0, left) / rollout_rate

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
        return f"{done_so_far}, ETA " + ("estimating" if eta is None else duration_text(eta))

    def line(self, now: float, loading: bool = False) -> str:
        return f"{self.done:,}/{self.total:,} solutions, " + self.info(now, loading)


def duration_text(s: float) -> str:
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
