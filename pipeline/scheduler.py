"""Drives many solutions' strategies against one rollout backend and one grader.

Each round, the scheduler collects the probes of every live solution, turns them into generation requests
(prefix prompt, ``n``, a seed derived from the run seed, the solution's content key, the step and how many
continuations that prefix already had), sends them to the backend in large batches with the requests of one
solution kept together (prefix reuse / prefix caching), grades every completion in one batch, and hands
each solution its results. Rollout and token accounting happen here, in one place.

Determinism: the seed of every request depends only on the run seed and the solution's content, and a
backend that honours per-request seeds returns the same samples whatever else is in the batch, so the same
solution gets the same labels under any sharding, worker count or restart.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.strategies import Probe, ProbeResult, StrategyParams, make_strategy
from pipeline.types import LabeledSolution, Solution, StepStats
from rollouts.base import GenRequest, RolloutBackend, SamplingConfig


def derive_seed(run_seed: int, key: str, step: int, draw: int) -> int:
    """A 63-bit seed for continuations ``draw..`` of prefix ``step`` of the solution with content ``key``."""
    h = hashlib.blake2b(f"{run_seed}|{key}|{step}|{draw}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


class PromptBuilder:
    """What the scheduler needs from a prompt format: the text that ends with steps[0..i]."""

    def prefix(self, problem: str, steps: Sequence[str]) -> str:  # pragma: no cover - protocol
        raise NotImplementedError


Grader = Callable[[Sequence[tuple[str, str]]], list]  # pairs (gold, response) -> verdicts with .correct


@dataclass
class SchedulerStats:
    rounds: int = 0
    requests: int = 0
    rollouts: int = 0
    rollout_tokens: int = 0
    ungradable: int = 0
    generate_seconds: float = 0.0
    grade_seconds: float = 0.0
    per_round_requests: list[int] = field(default_factory=list)


@dataclass
class _Live:
    sol: Solution
    gen: object
    probes: list[Probe]
    stats_seen: list[StepStats]
    rollouts: int = 0
    tokens: int = 0


class Scheduler:
    def __init__(
        self,
        backend: RolloutBackend,
        grade_batch: Grader,
        prompt: PromptBuilder,
        sampling: SamplingConfig,
        strategy: str,
        params: StrategyParams,
        seed: int = 0,
        max_batch_requests: int = 512,
    ):
        self.backend = backend
        self.grade_batch = grade_batch
        self.prompt = prompt
        self.sampling = sampling
        self.strategy = strategy
        self.params = params
        self.seed = seed
        self.max_batch_requests = max_batch_requests
        self.stats = SchedulerStats()

    # -------------------------------------------------------------------------------------------------
    def solution_text(self, sol: Solution) -> str:
        return self.prompt.prefix(sol.problem, sol.steps)

    def label(self, solutions: Sequence[Solution]) -> list[LabeledSolution]:
        """Label ``solutions``; returns one LabeledSolution per input, in input order."""
        if not solutions:
            return []
        t0 = time.perf_counter()
        own = self.grade_batch([(s.answer, self._own_response(s)) for s in solutions])
        self.stats.grade_seconds += time.perf_counter() - t0
        out: dict[int, LabeledSolution] = {}
        live: dict[int, _Live] = {}
        for idx, (sol, verdict) in enumerate(zip(solutions, own)):
            correct = verdict.correct
            gen = make_strategy(self.strategy, len(sol.steps), correct, self.params)
            state = _Live(sol, gen, [], [StepStats() for _ in sol.steps])
            state.solution_correct = correct  # type: ignore[attr-defined]
            self._advance(idx, state, None, live, out)
        while live:
            self._round(live, out)
        return [out[i] for i in range(len(solutions))]

    def _own_response(self, sol: Solution) -> str:
        # The final step is labeled by the solution's own answer: grade the solution's full text.
        return "\n".join(sol.steps)

    def _advance(self, idx: int, st: _Live, results: list[ProbeResult] | None, live: dict, out: dict) -> None:
        try:
            probes = st.gen.send(results) if results is not None else next(st.gen)  # type: ignore[attr-defined]
        except StopIteration as stop:
            oc = stop.value
            live.pop(idx, None)
            out[idx] = LabeledSolution(
                solution=st.sol,
                labels=oc.labels,
                stats=oc.stats,
                first_error=oc.first_error,
                solution_correct=st.solution_correct,  # type: ignore[attr-defined]
                rollouts=st.rollouts,
                rollout_tokens=st.tokens,
                strategy=self.strategy,
            )
            return
        probes = [p for p in probes]
        if any(p.n < 1 for p in probes):
            raise RuntimeError(f"strategy {self.strategy} asked for a probe with n < 1: {probes}")
        st.probes = probes
        live[idx] = st

    def _round(self, live: dict[int, _Live], out: dict) -> None:
        self.stats.rounds += 1
        reqs: list[GenRequest] = []
        owners: list[tuple[int, int]] = []  # (solution idx, probe idx)
        for idx in sorted(live):
            st = live[idx]
            sol = st.sol
            for j, p in enumerate(st.probes):
                draw = st.stats_seen[p.step].total
                reqs.append(
                    GenRequest(
                        prompt=self.prompt.prefix(sol.problem, sol.steps[: p.step + 1]),
                        n=p.n,
                        seed=derive_seed(self.seed, sol.key, p.step, draw),
                        group=sol.key,
                    )
                )
                owners.append((idx, j))
        self.stats.requests += len(reqs)
        self.stats.per_round_requests.append(len(reqs))
        completions: list = []
        t0 = time.perf_counter()
        for start in range(0, len(reqs), self.max_batch_requests):
            chunk = reqs[start : start + self.max_batch_requests]
            got = self.backend.generate(chunk, self.sampling)
            if len(got) != len(chunk) or any(len(c) != r.n for c, r in zip(got, chunk)):
                raise RuntimeError(f"backend {self.backend.name} returned the wrong number of completions")
            completions.extend(got)
        t1 = time.perf_counter()
        self.stats.generate_seconds += t1 - t0
        pairs = []
        for (idx, _j), comps in zip(owners, completions):
            gold = live[idx].sol.answer
            pairs.extend((gold, c.text) for c in comps)
        verdicts = self.grade_batch(pairs)
        self.stats.grade_seconds += time.perf_counter() - t1
        # Route results back, probe by probe, in the order the strategy asked.
        per_sol: dict[int, list[ProbeResult]] = {}
        pos = 0
        for (idx, j), comps in zip(owners, completions):
            vs = verdicts[pos : pos + len(comps)]
            pos += len(comps)
            p = live[idx].probes[j]
            correct = sum(1 for v in vs if v.correct is True)
            ungradable = sum(1 for v in vs if v.correct is None)
            tokens = sum(c.num_tokens for c in comps)
            st = live[idx]
            st.rollouts += len(comps)
            st.tokens += tokens
            seen = st.stats_seen[p.step]
            seen.total += len(comps)
            seen.correct += correct
            seen.ungradable += ungradable
            self.stats.rollouts += len(comps)
            self.stats.rollout_tokens += tokens
            self.stats.ungradable += ungradable
            per_sol.setdefault(idx, []).append(ProbeResult(p.step, len(comps), correct, ungradable, tokens))
        for idx, results in per_sol.items():
            self._advance(idx, live[idx], results, live, out)
