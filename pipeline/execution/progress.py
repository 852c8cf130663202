"""Live progress of a labeling run: solutions done of the total, rollouts, generated tokens per second and an
ETA, from per-solution reports of the workers (not only when a shard finishes).

:class:`ProgressState` is the arithmetic alone (no clock, no terminal), so it is tested as a unit. Counts are
kept per shard: a worker's partial counts for a shard are replaced by the shard's final counts when it
finishes (a retried shard is never counted twice). The ETA is the remaining solutions at the mean rate since
labeling started, which converges as the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProgressState:
    total: int
    t0: float = 0.0  # when labeling started (after the model load)
    _shards: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # shard -> (solutions, rollouts, tokens)

    def solution_done(self, shard: int, rollouts: int, tokens: int) -> None:
        """One more solution of ``shard`` labeled by a worker (partial count)."""
        s, r, t = self._shards.get(shard, (0, 0, 0))
        self._shards[shard] = (s + 1, r + rollouts, t + tokens)

    def shard_done(self, shard: int, solutions: int, rollouts: int, tokens: int) -> None:
        """``shard`` finished: its final counts replace whatever partial counts were reported."""
        self._shards[shard] = (solutions, rollouts, tokens)

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

    def eta(self, now: float) -> float | None:
        """Seconds left at the mean solution rate so far; None before the first solution is done."""
        if self.done >= self.total:
            return 0.0
        el = now - self.t0
        if self.done == 0 or el <= 0:
            return None
        return (self.total - self.done) * el / self.done

    def line(self, now: float) -> str:
        r, t = self.rates(now)
        eta = self.eta(now)
        return (f"{self.done:,}/{self.total:,} solutions, {self.rollouts:,} rollouts, {t:,.0f} tok/s, "
                f"ETA {'?' if eta is None else f'{eta:,.0f} s'}")
