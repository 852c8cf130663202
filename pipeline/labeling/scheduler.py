"""Drives many solutions' strategies against one rollout backend and one grader.

Each round, the scheduler collects the probes of every live solution, turns them into generation requests,
one per wave (prefix prompt, ``n``, a seed derived from the run seed, the solution's content key, the step and
how many continuations that prefix already had), sends them to the backend in large batches with the requests of one
solution kept together (prefix reuse / prefix caching), grades every completion in one batch, and hands
each solution its results. Rollout and token accounting happen here, in one place.

Determinism: the seed of every request depends only on the run seed and the solution's content, and a
backend that honours per-request seeds returns the same samples whatever else is in the batch, so the same
solution gets the same labels under any sharding, worker count or restart, and with or without drawing ahead.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.faults import fault_raise
from pipeline.labeling.ahead import SequenceLoad, draw_ahead, join_waves, keep_schedule, wave_probes
from pipeline.labeling.last_step import (
    CORRECT,
    EXCLUDED,
    FAILURE,
    is_no_answer,
    is_unreadable,
    outcome,
    own_correct,
    own_response,
)
from pipeline.labeling.reach import answer_bare, draw_bare
from pipeline.labeling.strategies import Probe, ProbeResult, Reuse, StrategyParams, make_strategy, row_extra
from pipeline.solution import LabeledSolution, Solution, StepStats
from rollouts.base import Counters, GenRequest, RolloutBackend, SamplingConfig

DEFAULT_MAX_BATCH_REQUESTS = 512  # requests per generate() call (max_batch_requests in a run file)


def derive_seed(run_seed: int, key: str, step: int, draw: int) -> int:
    """A 63-bit seed for continuations ``draw..`` of prefix ``step`` of the solution with content ``key``."""
    h = hashlib.blake2b(f"{run_seed}|{key}|{step}|{draw}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


class PromptBuilder:
    """What the scheduler needs from a prompt format: the text that ends with steps[0..i]."""

    def prefix(self, problem: str, steps: Sequence[str]) -> str:  # pragma: no cover - protocol
        raise NotImplementedError


# pairs (gold, response) -> verdicts with .correct; a grader that also reads each pair's problem text (which
# decides wording policies) is handed to the scheduler as a ProblemGrader
Grader = Callable[[Sequence[tuple[str, str]]], list]


@dataclass(frozen=True)
class ProblemGrader:
    """A grade callable that takes ``problems=`` (one problem text per pair, as :func:`graders.grade_batch`
    does): the scheduler gives it each solution's problem. The type is the declaration; a plain callable is
    called with the pairs alone."""

    fn: Callable[..., list]

    def __call__(self, pairs: Sequence[tuple[str, str]], problems: Sequence[str | None] | None = None) -> list:
        return self.fn(pairs, problems=problems)


@dataclass
class _Live:
    sol: Solution
    gen: object
    probes: list[Probe]
    stats_seen: list[StepStats]
    solution_correct: bool | None = None
    rollouts: int = 0
    tokens: int = 0
    # rollout reuse: the text each step adds to the prompt (step_deltas), built on first use
    deltas: list[str | None] | None = None
    # rollout reuse: the token ids of each sampled prefix's prompt (the backend's encode_prompt), on first use
    prompt_ids: list[tuple[int, ...]] | None = None
    # per probe of this round: the waves drawn (the probe's own n, then any of Probe.later drawn ahead)
    waves: list[tuple[int, ...]] | None = None


def step_deltas(prefixes: Sequence[str]) -> list[str | None]:
    """``deltas[j]``: the text prefix j adds to prefix j-1 (its step and separator); None where prefix j does
    not extend prefix j-1 (a format whose prefixes do not nest: no reuse across it)."""
    return [None] + [b[len(a):] if b.startswith(a) else None for a, b in zip(prefixes, prefixes[1:])]


def remainders(deltas: Sequence[str | None], step: int, text: str, limit: int) -> list[tuple[int, str]]:
    """:func:`reused_remainders` from the solution's :func:`step_deltas` (computed once per solution)."""
    out = []
    pos = 0
    for j in range(step + 1, limit):
        d = deltas[j]
        if d is None or not text.startswith(d, pos):
            break
        pos += len(d)
        out.append((j, text[pos:]))
    return out


def reused_remainders(prefixes: Sequence[str], step: int, text: str, limit: int) -> list[tuple[int, str]]:
    """Rollout reuse: the later prefixes ``text`` (a continuation of prefix ``step``) is also a draw of.

    A continuation of prefix i that begins by writing the solution's next steps verbatim, up to prefix j
    (``prefixes[i] + text`` starts with ``prefixes[j]``), is, from there on, a continuation of prefix j: its
    remainder is distributed exactly as a continuation sampled from prefix j (the model's distribution
    conditioned on the text so far). Returns ``(j, remainder)`` for each such j < ``limit``, nearest first. The
    remainder is graded on its own (it is what a draw of prefix j would have written), so the credit is exact,
    not an approximation; no token is generated for it.
    """
    return remainders(step_deltas(prefixes), step, text, limit)


@dataclass(frozen=True)
class SchedulerSettings:
    """What a :class:`Scheduler` reads of a run's configuration, resolved once (the labeling worker builds it from
    the run's ``LabelConfig``: :func:`pipeline.execution.shard_worker.scheduler_settings`) and frozen, so one object is
    passed rather than its fields copied through each call.

    ``streaming``: stream per-solution rounds (the backend takes requests while others are in flight: it has
    ``submit()``), as the backend's description says (rollouts/registry.py: ``BackendSpec.streaming``).
    ``reuse`` (``LabelConfig.reuse_rollouts``): credit a continuation that wrote the solution's next steps
    verbatim to those later prefixes too (:func:`reused_remainders`); exact only where the continuation's tokens
    are the later prompt's tokens, so it takes effect only with the backend's prompt encoder (the scheduler's
    ``encode``). ``unreadable``: :func:`pipeline.labeling.last_step.outcome`'s policy for unreadable answers.
    ``tail_fill``: drawing ahead (streaming only, :mod:`pipeline.labeling.ahead`): under this many continuations
    in flight on the engine, probes draw their later waves too; 0 = off."""

    strategy: str
    params: StrategyParams
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    seed: int = 0
    max_batch_requests: int = DEFAULT_MAX_BATCH_REQUESTS
    streaming: bool = False
    reuse: bool = False
    unreadable: str = "failure"
    tail_fill: int = 0


class Scheduler:
    """Labels solutions with ``backend``, grading with ``grade_batch``, prompting with ``prompt``, as
    ``settings`` say. ``encode``: the backend's prompt encoder (``BackendSpec.token_ids``; without it, an
    OpenAI-compatible server returning text only, nothing is reused); ``load``: the continuations in flight on the
    engine, shared by the schedulers of one worker (drawing ahead)."""

    def __init__(
        self,
        backend: RolloutBackend,
        grade_batch: Grader,
        prompt: PromptBuilder,
        settings: SchedulerSettings,
        *,
        encode: Callable[[str], Sequence[int]] | None = None,
        load: SequenceLoad | None = None,
    ):
        self.backend = backend
        self.grade_batch = grade_batch
        self.prompt = prompt
        self.settings = settings
        self.sampling = settings.sampling
        self.strategy = settings.strategy
        self.params = settings.params
        self.seed = settings.seed
        self.max_batch_requests = settings.max_batch_requests
        self.stats = Counters()
        self.on_solution: Callable[[LabeledSolution], None] | None = None  # each finished solution (progress)
        self.streaming = bool(settings.streaming)
        self.reuse = bool(settings.reuse) and encode is not None
        self.encode = encode
        self.unreadable = settings.unreadable
        self.tail_fill = max(0, int(settings.tail_fill))
        self.load = load if load is not None else SequenceLoad()

    # -------------------------------------------------------------------------------------------------
    def label(self, solutions: Sequence[Solution]) -> list[LabeledSolution]:
        """Label ``solutions``; returns one LabeledSolution per input, in input order."""
        if not solutions:
            return []
        t0 = time.perf_counter()
        own = self._grade([(s.answer, own_response(s)) for s in solutions], [s.problem for s in solutions])
        self.stats.grade_seconds += time.perf_counter() - t0
        out: dict[int, LabeledSolution] = {}
        live: dict[int, _Live] = {}
        # the bare problem's draws by problem_key: (result, rollouts, tokens, payer) (pipeline.labeling.reach)
        self._bare: dict[str, tuple[ProbeResult, int, int, int]] = {}
        if self.params.reach_gate and self.params.reach_probe == "bare":
            draw_bare(self, solutions, derive_seed)
        for idx, (sol, verdict) in enumerate(zip(solutions, own)):
            with blame(sol):
                correct = own_correct(verdict, self.unreadable)
                gen = make_strategy(self.strategy, len(sol.steps), correct, self.params)
            state = _Live(sol, gen, [], [StepStats() for _ in sol.steps], solution_correct=correct)
            self._advance(idx, state, None, live, out)
        if self.streaming and live:
            self._label_streaming(live, out)
        while live:
            self._round(live, out)
        return [out[i] for i in range(len(solutions))]

    def _grade(self, pairs: list, problems: list) -> list:
        """Verdicts of ``pairs``, each graded with its solution's problem text where the grader takes it."""
        if isinstance(self.grade_batch, ProblemGrader):
            return self.grade_batch(pairs, problems=problems)
        return self.grade_batch(pairs)

    def _advance(self, idx: int, st: _Live, results: list[ProbeResult] | None, live: dict, out: dict) -> None:
        with blame(st.sol):
            fault_raise("label-solution", st.sol.id)
            self._advance1(idx, st, results, live, out)

    def _advance1(self, idx: int, st: _Live, results: list[ProbeResult] | None, live: dict, out: dict) -> None:
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
                solution_correct=st.solution_correct,
                rollouts=st.rollouts,
                rollout_tokens=st.tokens,
                strategy=self.strategy,
                extra=row_extra(oc, self.params),
            )
            if self.on_solution is not None:
                self.on_solution(out[idx])
            return
        probes = [p for p in probes]
        if any(p.step < 0 for p in probes):  # the bare problem: answered from the per-problem draws, no round
            return self._advance1(idx, st, answer_bare(self, idx, st, probes), live, out)
        if any(p.n < 1 for p in probes):
            raise RuntimeError(f"strategy {self.strategy} asked for a probe with n < 1: {probes}")
        st.probes = probes
        st.waves = None
        live[idx] = st

    def _requests(self, st: _Live) -> list[GenRequest]:
        with blame(st.sol):
            return self._requests1(st)

    def _requests1(self, st: _Live) -> list[GenRequest]:
        """One request per wave: a probe's own wave, then each later wave drawn ahead, each with the seed the
        plain schedule gives that wave (its first draw's index). An engine seeds sample i of a request with
        seed + i (vLLM) or from the request's (seed, n) (hf), so one request of n = the sum of the waves would
        sample other continuations than the plain schedule's later waves; a request per wave samples the very
        same ones, and drawing ahead changes only when a wave is drawn, never what is drawn."""
        sol = st.sol
        reqs = []
        for p, ws in zip(st.probes, self._waves(st), strict=True):
            prompt = self.prompt.prefix(sol.problem, sol.steps[: p.step + 1])
            draw = st.stats_seen[p.step].total
            for w in ws:
                reqs.append(GenRequest(prompt=prompt, n=w, seed=derive_seed(self.seed, sol.key, p.step, draw),
                                       group=sol.key))
                draw += w
        return reqs

    @staticmethod
    def _waves(st: _Live) -> list[tuple[int, ...]]:
        return st.waves or [(p.n,) for p in st.probes]

    def _draw_ahead(self, st: _Live) -> None:
        """This round's waves for ``st``: each probe's own, plus later waves that fit (:attr:`tail_fill`)."""
        st.waves = draw_ahead(st.probes, self.tail_fill - self.load.value if self.tail_fill else 0)

    def _reuse_pairs(self, st: _Live, comps_per_probe: list) -> list[tuple[int, int, int, str]]:
        """``(probe index, completion index, later step, remainder)`` for every reusable continuation of one
        solution's round: it wrote the later prefixes' steps verbatim, token for token (the later prompt's
        token ids are the earlier prompt's followed by the continuation's first ids, so the model saw exactly
        the later prompt), and it was not cut at ``max_new_tokens`` (its remainder had fewer tokens than a
        fresh draw of the later prefix would have had: censored, never counted)."""
        if not self.reuse:
            return []
        sol = st.sol
        limit = len(sol.steps) - 1  # the last step is labeled by the solution's own answer, never sampled
        if st.deltas is None:
            prompts = [self.prompt.prefix(sol.problem, sol.steps[: i + 1]) for i in range(limit)]
            st.deltas = step_deltas(prompts)
            st.prompt_ids = [tuple(self.encode(p)) for p in prompts]
        ids = st.prompt_ids
        out = []
        for k, (p, comps) in enumerate(zip(st.probes, comps_per_probe)):
            if p.step >= limit:
                # a probe of the last step (sampled when its own answer does not decide it, e.g. with
                # --no-trust-correct): no later sampled prefix exists for its continuations to be a draw of
                continue
            base = ids[p.step]
            for ci, c in enumerate(comps):
                if c.finish_reason == "length" or c.token_ids is None:
                    continue
                for j, rem in remainders(st.deltas, p.step, c.text, limit):
                    later = ids[j]
                    if later[: len(base)] != base or tuple(c.token_ids[: len(later) - len(base)]) != later[len(base):]:
                        break  # the copied text's tokens are not the later prompt's: not a draw of it
                    out.append((k, ci, j, rem))
        return out

    def _keep(self, st: _Live, comps_per_probe: list, verdicts: list, reused: Sequence) -> tuple:
        """:func:`pipeline.labeling.ahead.keep_schedule` for one solution's round; the dropped continuations
        count as generated (rollouts, tokens: they were paid for), never as a draw of a step."""
        if not st.waves or all(len(w) == 1 for w in st.waves):
            return comps_per_probe, verdicts, reused, st.probes
        kept = keep_schedule(st.probes, st.waves, comps_per_probe,
                             [outcome(v, self.unreadable) == CORRECT for v in verdicts], reused)
        for _step, dropped in kept.dropped:
            tokens = sum(c.num_tokens for c in dropped)
            st.rollouts += len(dropped)
            st.tokens += tokens
            self.stats.rollouts += len(dropped)
            self.stats.rollout_tokens += tokens
            self.stats.drawn_ahead_dropped += len(dropped)
            # not a draw of the step: a later probe of it draws these seeds again, as the plain schedule would
        return kept.comps, [verdicts[i] for i in kept.verdict_index], kept.reused, kept.probes

    def _account(self, st: _Live, comps_per_probe: list, verdicts: list,
                 reused: Sequence[tuple[int, int, int, object]] = ()) -> list[ProbeResult]:
        """Count the graded completions of one solution's round; returns its ProbeResults in probe order.
        ``reused``: ``(probe index, completion index, later step, verdict of the remainder)`` (rollout reuse).
        What each verdict counts as is :func:`pipeline.labeling.last_step.outcome`'s rule."""
        comps_per_probe, verdicts, reused, probes = self._keep(st, comps_per_probe, verdicts, reused)
        credits: dict[int, dict[int, list[int]]] = {}
        deepest: dict[tuple[int, int], tuple[int, object]] = {}  # (probe, completion) -> (step, verdict)
        for k, ci, j, v in reused:
            c = credits.setdefault(k, {}).setdefault(j, [0, 0, 0, 0, 0])
            o = outcome(v, self.unreadable)
            c[0] += 1
            c[1] += o == CORRECT
            c[2] += o == EXCLUDED
            c[3] += is_no_answer(v)
            c[4] += o == FAILURE and is_unreadable(v)
            self.stats.reused_rollouts += 1
            if j > deepest.get((k, ci), (-1, None))[0]:
                deepest[(k, ci)] = (j, v)
        results = []
        pos = 0
        for k, (p, comps) in enumerate(zip(probes, comps_per_probe)):
            vs = verdicts[pos : pos + len(comps)]
            pos += len(comps)
            outs = [outcome(v, self.unreadable) for v in vs]
            correct = outs.count(CORRECT)
            ungradable = outs.count(EXCLUDED)  # grader infrastructure: never a verdict
            no_answer = sum(1 for v in vs if is_no_answer(v))
            unreadable = sum(1 for v, o in zip(vs, outs) if o == FAILURE and is_unreadable(v))
            deep: dict[int, list[int]] = {}
            for ci, v in enumerate(vs):  # each continuation once, at the deepest prefix it reached
                j, dv = deepest.get((k, ci), (p.step, v))
                o = outcome(dv, self.unreadable)
                if o != EXCLUDED:
                    d = deep.setdefault(j, [0, 0])
                    d[0] += 1
                    d[1] += o == CORRECT
            tokens = sum(c.num_tokens for c in comps)
            st.rollouts += len(comps)
            st.tokens += tokens
            seen = st.stats_seen[p.step]
            seen.total += len(comps)
            seen.correct += correct
            seen.ungradable += ungradable
            seen.no_answer += no_answer
            self.stats.rollouts += len(comps)
            self.stats.rollout_tokens += tokens
            self.stats.ungradable += ungradable
            self.stats.no_answer += no_answer
            self.stats.unreadable += unreadable
            reuse = tuple(Reuse(j, *c) for j, c in sorted(credits.get(k, {}).items()))
            results.append(ProbeResult(p.step, len(comps), correct, ungradable, tokens, no_answer, unreadable,
                                       reuse, tuple((j, g, c) for j, (g, c) in sorted(deep.items()))))
        return results

    def _grade_rounds(self, live: dict[int, _Live], done: dict[int, list], out: dict) -> None:
        """Grade the finished rounds of several solutions in one batch, then advance each of them."""
        t0 = time.perf_counter()
        pairs = [(live[idx].sol.answer, c.text) for idx, cpp in done.items() for comps in cpp for c in comps]
        n_main = len(pairs)
        reuse: dict[int, list] = {}
        for idx, cpp in done.items():
            with blame(live[idx].sol):
                reuse[idx] = self._reuse_pairs(live[idx], cpp)
            pairs.extend((live[idx].sol.answer, rem) for _k, _ci, _j, rem in reuse[idx])
        problems = [live[idx].sol.problem for idx, cpp in done.items() for comps in cpp for _c in comps]
        problems += [live[idx].sol.problem for idx in done for _r in reuse[idx]]
        verdicts = self._grade(pairs, problems)
        self.stats.grade_seconds += time.perf_counter() - t0
        pos, rpos = 0, n_main
        for idx, cpp in done.items():
            n = sum(len(c) for c in cpp)
            r = reuse[idx]
            rv = [(k, ci, j, v) for (k, ci, j, _rem), v in zip(r, verdicts[rpos : rpos + len(r)])]
            rpos += len(r)
            with blame(live[idx].sol):
                results = self._account(live[idx], cpp, verdicts[pos : pos + n], rv)
            pos += n
            self._advance(idx, live[idx], results, live, out)

    def _round(self, live: dict[int, _Live], out: dict) -> None:
        """Synchronous mode: one round = the probes of every live solution, generated in large batches."""
        self.stats.rounds += 1
        reqs: list[GenRequest] = []
        owners: list[int] = []
        for idx in sorted(live):
            r = self._requests(live[idx])
            reqs.extend(r)
            owners.extend([idx] * len(r))
        self.stats.requests += len(reqs)
        self.stats.per_round_requests.append(len(reqs))
        completions: list = []
        t0 = time.perf_counter()
        for start in range(0, len(reqs), self.max_batch_requests):
            chunk = reqs[start : start + self.max_batch_requests]
            got = self.backend.generate(chunk, self.sampling)
            _check(self.backend, chunk, got)
            completions.extend(got)
        self.stats.generate_seconds += time.perf_counter() - t0
        done: dict[int, list] = {}
        for idx, comps in zip(owners, completions):
            done.setdefault(idx, []).append(comps)
        done = {idx: join_waves(self._waves(live[idx]), per_request) for idx, per_request in done.items()}
        self._grade_rounds(live, done, out)

    def _label_streaming(self, live: dict[int, _Live], out: dict) -> None:
        """Streaming mode (backends with ``submit``, e.g. vLLM's async engine): every solution's next round is
        submitted as soon as its own previous round is graded, so the engine never waits for the slowest
        solution of a round."""
        import queue

        finished: queue.SimpleQueue = queue.SimpleQueue()
        waiting: dict[int, list] = {}  # idx -> completions per probe (None until its future is done)
        outstanding: dict[int, int] = {}

        def done(fut, idx: int, j: int, n: int) -> None:
            self.load.add(-n)
            finished.put((idx, j, n, fut))

        def launch(idx: int) -> None:
            self._draw_ahead(live[idx])
            reqs = self._requests(live[idx])
            self.stats.requests += len(reqs)
            waiting[idx] = [None] * len(reqs)
            outstanding[idx] = len(reqs)
            self.load.add(sum(r.n for r in reqs))
            futs = self.backend.submit(reqs, self.sampling)
            for j, (f, r) in enumerate(zip(futs, reqs)):
                f.add_done_callback(lambda fut, idx=idx, j=j, n=r.n: done(fut, idx, j, n))

        for idx in sorted(live):
            launch(idx)
        t0 = time.perf_counter()
        while outstanding:
            batch = [finished.get()]
            while True:  # drain whatever else is ready, to grade in one batch
                try:
                    batch.append(finished.get_nowait())
                except queue.Empty:
                    break
            ready: dict[int, list] = {}
            for idx, j, n, fut in batch:
                try:
                    comps = fut.result()  # re-raises an engine error here
                except Exception as e:
                    sol, step = live[idx].sol, live[idx].probes[wave_probes(self._waves(live[idx]))[j]].step
                    where = f" ({sol.source})" if sol.source else ""
                    raise RuntimeError(f"generation failed for solution {sol.id!r}{where} (prefix ending at step "
                                       f"{step + 1} of {len(sol.steps)}): {e}") from e
                if len(comps) != n:
                    raise RuntimeError(f"backend {self.backend.name} returned {len(comps)} completions, wanted {n}")
                waiting[idx][j] = comps
                outstanding[idx] -= 1
                if outstanding[idx] == 0:
                    del outstanding[idx]
                    ready[idx] = join_waves(self._waves(live[idx]), waiting.pop(idx))
            if ready:
                self.stats.rounds += 1
                self._grade_rounds(live, ready, out)
                for idx in ready:
                    if idx in live:
                        launch(idx)
        self.stats.generate_seconds += time.perf_counter() - t0


class SolutionFailure(Exception):
    """An exception raised while the scheduler worked on one solution, wrapped: :attr:`solution` is that
    solution, ``__cause__`` the exception itself (a backend's, a grader's, a bug). The worker reads it by type
    and reports the cause naming the row (``pipeline.execution.shard_worker.WorkerError``)."""

    def __init__(self, solution: Solution):
        super().__init__(solution)
        self.solution = solution

    def __str__(self) -> str:
        return str(self.__cause__) if self.__cause__ is not None else f"solution {self.solution.id!r} failed"


@contextlib.contextmanager
def blame(sol: Solution):
    """An exception raised while working on one solution leaves as a :class:`SolutionFailure` naming it, chained
    to the exception (one already blamed on a solution passes as it is)."""
    try:
        yield
    except SolutionFailure:
        raise
    except Exception as e:
        raise SolutionFailure(sol) from e


def _check(backend, chunk, got) -> None:
    if len(got) != len(chunk) or any(len(c) != r.n for c, r in zip(got, chunk)):
        raise RuntimeError(f"backend {backend.name} returned the wrong number of completions")
