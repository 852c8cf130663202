"""What runs a shard, wherever it runs: build the backend once, label a shard, write its Parquet file.

Executors (:mod:`pipeline.execution.executors`) only decide *where* a :class:`ShardWorker` lives (in the driver, or in
a Ray actor per GPU / CPU slot); they all call :meth:`ShardWorker.process`. The shard file is written whole
under a name of its own (owner and attempt), so a shard is either complete or absent, and a re-run of it never
touches an earlier attempt's file.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from pipeline.config import ConfigError, LabelConfig
from pipeline.errors import RowError
from pipeline.labeling.ahead import SequenceLoad, histogram_since, mean_level
from pipeline.labeling.scheduler import ProblemGrader, Scheduler, SchedulerSettings, SolutionFailure
from pipeline.labeling.strategies import StrategyParams
from pipeline.solution import Solution
from pipeline.storage.schema import to_table
from pipeline.storage.store import CorpusStore, new_attempt
from rollouts.prompts import PromptFormat


def source_where(source: str) -> str:
    """``"file:row"`` (``Solution.source``, 0-based row) as people name it: ``file line N`` (JSON Lines, 1-based,
    as validation errors say it) or ``file row N`` (Parquet / JSON array index)."""
    file, sep, row = source.rpartition(":")
    if not sep or not row.isdigit():
        return source
    from pipeline.input.spec import row_where

    kind = "jsonl" if not file.endswith((".parquet", ".json", ".pq")) else "parquet"
    return row_where(file, int(row), kind)


class WorkerError(RowError, RuntimeError):
    """An error raised while a worker labeled a shard, as one message that names the row (file and line) when
    the failure belongs to one solution, else the shard and its rows. ``detail`` is the worker's own
    traceback (shown with ``MCPRM_DEBUG=1``). Built only from strings, so it crosses process boundaries
    (Ray) intact."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message, detail)
        self.message = message
        self.detail = detail

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_exception(cls, e: BaseException, shard: int, solutions: Sequence[Solution]) -> WorkerError:
        import traceback

        detail = "".join(traceback.format_exception(type(e), e, e.__traceback__))  # the chain, where chained
        sol = None
        if isinstance(e, SolutionFailure) and e.__cause__ is not None:  # the scheduler's: one solution's failure
            sol, e = e.solution, e.__cause__
        if sol is not None:
            where = source_where(sol.source) if sol.source else "an input row"
            what = f"{where} (solution id {sol.id!r}, {len(sol.steps)} steps)"
        elif solutions:
            first, last = solutions[0], solutions[-1]
            span = (source_where(first.source) if len(solutions) == 1
                    else f"{source_where(first.source)} to {source_where(last.source)}")
            what = f"shard {shard} ({len(solutions)} solutions, {span})"
        else:
            what = f"shard {shard}"
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        msg = f"a worker failed while labeling {what}: {type(e).__name__}" + (f": {text}" if text else "")
        return cls(msg, detail)


def worker_reject(e: SolutionFailure) -> dict:
    """A row a worker failed on, as the rejects file records validation rejects (file, row, where, field,
    reason, raw), with its content key and id: what ``--skip-bad`` quarantines instead of stopping the run."""
    import traceback

    sol, cause = e.solution, e.__cause__
    file, sep, row = (sol.source or "").rpartition(":")
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return {"file": file if sep else sol.source, "row": int(row) if sep and row.isdigit() else None,
            "where": source_where(sol.source) if sol.source else "an input row", "field": None,
            "reason": f"a worker failed while labeling it: {type(cause).__name__}" + (f": {text}" if text else ""),
            "raw": "", "key": sol.key, "id": sol.id, "stage": "labeling",
            "detail": "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))[-4000:]}


def build_backend(cfg: LabelConfig):
    """The chosen backend, built as its registry entry says (rollouts/registry.py)."""
    return cfg.backend_spec.build(cfg.model_ref(), cfg.backend_options)


def strategy_params(cfg: LabelConfig) -> StrategyParams:
    """The strategies' parameters: each field of :class:`StrategyParams` from the run's option of the same name,
    so a new strategy option is its declaration (pipeline/options.py) and its field, and nothing here. Two are
    read as the config resolves them: trust of a right answer (off for per-step unless asked) and the relative
    drop (0 on the command line is "off")."""
    resolved = {"trust_correct": cfg.effective_trust_correct(), "relative_drop": cfg.relative_drop or None}
    return StrategyParams(**{f.name: resolved[f.name] if f.name in resolved else getattr(cfg, f.name)
                             for f in dataclasses.fields(StrategyParams) if f.name in resolved or hasattr(cfg, f.name)})


def scheduler_settings(cfg: LabelConfig, prompt: PromptFormat, capacity: int | None = None) -> SchedulerSettings:
    """What the scheduler reads of ``cfg``, resolved once per run (``prompt``: the run's format, where a
    continuation stops; ``capacity``: the sequences the worker's engines run at once, where its backend says)."""
    return SchedulerSettings(
        strategy=cfg.strategy, params=strategy_params(cfg), sampling=cfg.sampling_config(prompt), seed=cfg.seed,
        max_batch_requests=cfg.max_batch_requests, streaming=cfg.backend_spec.streaming(cfg.backend_options),
        reuse=cfg.reuse_rollouts, unreadable=cfg.unreadable, tail_fill=cfg.worker_tail_fill(capacity))


def grader_workers(cfg: LabelConfig, cpus: float) -> int:
    """Grader processes of one worker with ``cpus`` CPUs: all of them on a CPU backend's worker (which grades
    between generations), all but two on a GPU worker (its engine process and its own threads keep two busy
    while it generates)."""
    return max(1, int(cpus) - (2 if cfg.worker_gpus > 0 else 0))


def grade_callable(cfg: LabelConfig, cpus: float) -> ProblemGrader:
    """``grade(pairs, problems=None) -> verdicts`` with the run's grader and options: what the scheduler grades
    with (a :class:`ProblemGrader`: it passes each solution's problem text, which decides the grader's wording
    policies)."""
    import functools

    from graders import grade_batch

    return ProblemGrader(functools.partial(grade_batch, config=cfg.grader_config(grader_workers(cfg, cpus)),
                                           grader=cfg.grader))


class ShardWorker:
    """Labels shards with one backend, built once. ``cpus``: the CPUs this worker was given (a Ray actor's);
    default ``cfg.worker_cpus()``."""

    def __init__(self, cfg: LabelConfig, backend=None, cpus: float | None = None):
        self.cpus = float(cpus or cfg.worker_cpus())
        cfg.backend_spec.prepare_worker(cfg.backend_options, self.cpus)  # e.g. hf on CPU: torch threads
        from graders.registry import warm_grader

        warm_grader(cfg.grader, grader_workers(cfg, self.cpus))  # e.g. sympy's processes start while the model loads
        self.backend = backend if backend is not None else build_backend(cfg)
        self.load = SequenceLoad()  # continuations in flight on this worker's engine, over its shards
        self._polled: dict[str, float] = {}  # the load's histogram at the last demand_now() (its window's start)
        self.cfg = None
        self.use(cfg)

    def use(self, cfg: LabelConfig) -> None:
        """Label the next shards for ``cfg`` (another run's output, strategy or K) with the backend already built;
        its model and backend options must be this worker's (a long-lived worker serves many runs)."""
        if self.cfg is not None:
            if cfg is self.cfg:
                return
            if (cfg.model_ref(), cfg.prompting.backend, cfg.backend_options) != (
                    self.cfg.model_ref(), self.cfg.prompting.backend, self.cfg.backend_options):
                raise ConfigError("this worker's backend was built for another model or backend options; start "
                                  "new workers for this run")
        self.cfg = cfg
        self.prompt = cfg.prompt_builder()
        self.settings = scheduler_settings(cfg, self.prompt, getattr(self.backend, "seqs_capacity", None))
        self.grade = grade_callable(cfg, self.cpus)
        self.store = CorpusStore(cfg.output)

    def label(self, solutions: Sequence[Solution], on_solution=None):
        encode = self.backend.encode_prompt if self.cfg.backend_spec.token_ids else None
        sched = Scheduler(self.backend, self.grade, self.prompt, self.settings, encode=encode, load=self.load)
        sched.on_solution = on_solution
        return sched.label(solutions), sched.stats

    on_solution = None  # called with each LabeledSolution as it is done (live progress); set by the executor

    def stats(self) -> dict:
        """The backend's counters, the demand this worker put on its engine (continuations in flight over time:
        :class:`pipeline.labeling.ahead.SequenceLoad`) and the sequences its engines run at once, where the
        backend says (``seqs_capacity``)."""
        d = self.backend.stats.as_dict()
        d["in_flight_hist"] = self.load.histogram()
        cap = getattr(self.backend, "seqs_capacity", None)
        if cap:
            d["seqs_capacity"] = int(cap)
        return d

    def process(self, version: int, shard: int, solutions: Sequence[Solution]) -> dict:
        """Label and write one shard (``self.on_solution`` hears of each solution as it is done)."""
        t0 = time.perf_counter()
        rejects: list[dict] = []
        todo = list(solutions)
        while True:
            try:
                labeled, st = self.label(todo, self.on_solution)
                break
            except WorkerError:
                raise
            except SolutionFailure as e:  # one row's failure: with --skip-bad it is quarantined, the rest labeled
                if not self.cfg.skip_bad or e.solution not in todo or e.__cause__ is None:
                    raise WorkerError.from_exception(e, shard, solutions) from e
                rejects.append(worker_reject(e))
                todo.remove(e.solution)
            except Exception as e:  # labeling touches no storage: even an OSError here is the engine's or a row's
                raise WorkerError.from_exception(e, shard, solutions) from e
        table = to_table(labeled, self.cfg.k)
        # a name of this attempt's own: a task Ray resubmits while this attempt still finishes can never
        # overwrite the bytes a manifest records (the driver keeps the first result)
        rel = self.store.shard_rel(version, shard, attempt=new_attempt())
        steps = sum(len(s.steps) for s in todo)
        written = self.store.write_table(rel, table, counts={"steps": steps, **st.shard_dict()},
                                         extra={"rejects": rejects} if rejects else None)  # sidecar, shard
        return {
            "shard": shard,
            "path": rel,
            "rows": table.num_rows,
            "bytes": written["bytes"],
            "sha256": written["sha256"],
            "steps": steps,
            **st.shard_dict(),
            **({"rejects": rejects} if rejects else {}),
            "seconds": time.perf_counter() - t0,
        }

    def demand_now(self) -> dict:
        """The continuations in flight on average since the previous call (the first: since the first shard)
        and the engines' capacity, asked while shards run (:class:`pipeline.execution.demand.ShardsAtOnce`).
        Nothing where the backend states no capacity; no mean where no time has passed with a load."""
        cap = getattr(self.backend, "seqs_capacity", None)
        now = self.load.histogram(until_now=True)
        was, self._polled = self._polled, now
        if not cap:
            return {}
        mean = mean_level(histogram_since(now, was))
        return {"seqs_capacity": int(cap), **({"in_flight_mean": round(mean, 1)} if mean is not None else {})}

    def close(self) -> None:
        self.backend.close()
