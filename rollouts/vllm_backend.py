"""vLLM backend (GPU): ``vllm.LLM`` driven offline (``engine="offline"``, :class:`OfflineVLLMBackend`), by
mcprm's own engine loop (``engine="loop"``, streaming, the default, :class:`LoopVLLMBackend`), or vLLM's
``AsyncLLM`` (``engine="async"``, :class:`AsyncVLLMBackend`); ``VLLMBackend(..., engine=...)`` builds the one named.

Written against vLLM 0.26 (V1 engine); ``vllm`` is imported only when a backend is built.

* Every request becomes one vLLM request with ``SamplingParams(n=req.n, seed=req.seed, ...)``. vLLM fans
  ``n`` out into child requests with seeds ``seed + i``, so callers should give requests well-spread seeds
  (hash-derived, not consecutive integers) to keep samples of different requests independent, and a request of
  n = a + b does not sample what requests of a and b would (the scheduler sends each wave as its own request).
* Prefix caching is on by default, and requests are ordered so a group's requests (one solution's step
  prefixes) are adjacent and scheduled together: the shared problem/solution prefix is computed once.
* ``generate`` submits one whole batch (``LLM.generate`` in offline mode). With a streaming engine
  (``loop`` or ``async``), ``submit`` returns one ``concurrent.futures.Future`` per request right away, so a
  scheduler can keep many solutions' requests in flight and submit more as soon as any finishes, never
  waiting for a round's slowest solution; ``generate`` is then ``submit`` + wait.
* ``loop``: one thread owns the ``LLM``; it adds whatever was submitted (``LLM.enqueue``) before each
  ``llm_engine.step()`` and resolves a request's future when its final output arrives. It runs the very code
  path of ``LLM.generate`` (``_run_engine``), so it keeps the offline engine's throughput. vLLM's ``AsyncLLM``
  measured 0.70-0.77x of ``LLM.generate`` on the same requests (BENCHMARKS.md), hence ``loop`` by default.
* ``stats`` count prompt tokens (per sample), generated tokens, and prefix-cache hits read from vLLM's
  in-process Prometheus counters (``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``, in tokens,
  engine-wide since the backend started); ``generate_seconds`` is wall time with work in flight, and
  ``stats.extra`` holds ``prefix_cache_hit_rate``, ``rollouts_per_s`` and ``generated_tokens_per_s``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from .base import (
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_VLLM_ENGINE,
    Completion,
    Counters,
    GenRequest,
    SamplingConfig,
    order_by_group,
    require,
)
from .base import VLLM_ENGINES as ENGINES

_VLLM_HINT = "pip install 'vllm==0.26.0' (needs a CUDA GPU)"


def _prefix_cache_counters() -> tuple[float, float] | None:
    """(queries, hits) in tokens from vLLM's in-process metrics, or None if unavailable."""
    try:
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot
    except ImportError:  # pragma: no cover - depends on the vLLM version
        return None
    queries = hits = 0.0
    found = False
    for m in get_metrics_snapshot():
        if not isinstance(m, Counter):
            continue
        name = m.name.removesuffix("_total")
        if name == "vllm:prefix_cache_queries":
            queries += m.value
            found = True
        elif name == "vllm:prefix_cache_hits":
            hits += m.value
    return (queries, hits) if found else None


# vLLM's scheduler gauges (in-process Prometheus, set at every engine step): the engine's own view of its load,
# beside the scheduler's count of continuations in flight (pipeline.labeling.ahead.SequenceLoad). Sampled about
# once a second of work, so a mean is over the busy time: an engine that runs fewer sequences than mcprm has in
# flight is slow to take them (its waiting queue says why), one that runs what mcprm has is short of work.
REFRESH_S = 1.0  # how often a busy engine's counters are read and its gauges sampled
ENGINE_GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
                 "vllm:kv_cache_usage_perc": "kv_usage"}


def _engine_gauges() -> dict[str, float] | None:
    """Sequences running and waiting now (summed over the process's engines) and the fullest KV cache's share,
    and the engine steps so far with the tokens they computed (vLLM's histogram of tokens per step: its count and
    sum), from vLLM's in-process metrics; None where they are not available."""
    try:
        from vllm.v1.metrics.reader import Gauge, Histogram, get_metrics_snapshot
    except ImportError:  # pragma: no cover - depends on the vLLM version
        return None
    out: dict[str, float] = {}
    for m in get_metrics_snapshot():
        if isinstance(m, Histogram) and m.name == "vllm:iteration_tokens_total":
            out["steps"] = out.get("steps", 0.0) + float(m.count)
            out["step_tokens"] = out.get("step_tokens", 0.0) + float(m.sum)
            continue
        key = ENGINE_GAUGES.get(m.name) if isinstance(m, Gauge) else None
        if key == "kv_usage":
            out[key] = max(out.get(key, 0.0), float(m.value))
        elif key is not None:
            out[key] = out.get(key, 0.0) + float(m.value)
    return out or None


def add_engine_steps(extra: dict, gauges: dict[str, float] | None) -> None:
    """The engine steps and their tokens so far (cumulative, like the prefix-cache counters) into ``extra``."""
    if gauges and "steps" in gauges:
        extra["engine_steps"] = int(gauges["steps"])
        extra["engine_step_tokens"] = int(gauges["step_tokens"])


def add_engine_sample(extra: dict, gauges: dict[str, float] | None) -> None:
    """Add one sample of :func:`_engine_gauges` to a backend's ``stats.extra``: additive sums (so a warm worker's
    share of one run is a difference) and the largest running count and KV-cache share seen."""
    if not gauges or "running" not in gauges:
        return
    run, wait = gauges.get("running", 0.0), gauges.get("waiting", 0.0)
    extra["engine_samples"] = extra.get("engine_samples", 0) + 1
    extra["engine_running_sum"] = round(extra.get("engine_running_sum", 0.0) + run, 1)
    extra["engine_waiting_sum"] = round(extra.get("engine_waiting_sum", 0.0) + wait, 1)
    extra["engine_running_max"] = max(extra.get("engine_running_max", 0), int(run))
    if "kv_usage" in gauges:
        extra["kv_cache_usage_max"] = round(max(extra.get("kv_cache_usage_max", 0.0), gauges["kv_usage"]), 4)


class VLLMBackend:
    """Rollouts with vLLM; see the module docstring. ``engine_kwargs`` go to ``vllm.LLM`` / ``AsyncEngineArgs``.

    ``VLLMBackend(model, ..., engine=...)`` builds the engine's own class (``ENGINE_CLASSES``):
    :class:`OfflineVLLMBackend`, :class:`LoopVLLMBackend` or :class:`AsyncVLLMBackend`. This base holds what they
    share: the sampling parameters, the completions and their counters, the prefix-cache counters."""

    name = "vllm"
    engine_mode: str = ""
    streaming = True  # has submit(); the scheduler then streams rounds
    llm = None  # vllm.LLM (offline, loop)
    engine = None  # vllm AsyncLLM (async)

    def __new__(cls, *args, engine: str | None = None, **kwargs):
        if cls is VLLMBackend:
            engine = DEFAULT_VLLM_ENGINE if engine is None else engine
            if engine not in ENGINE_CLASSES:
                raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
            cls = ENGINE_CLASSES[engine]
        return super().__new__(cls)

    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = DEFAULT_MAX_MODEL_LEN,
        dtype: str = "auto",
        load_format: str = "auto",
        enable_prefix_caching: bool = True,
        seed: int = 0,
        engine: str | None = None,
        **engine_kwargs,
    ):
        if engine is not None and engine != self.engine_mode:
            raise ValueError(f"{type(self).__name__} runs engine={self.engine_mode!r}, got {engine!r}")
        t0 = time.perf_counter()
        self._vllm = require("vllm", _VLLM_HINT)
        self.model = str(model)
        self.stats = Counters()
        self.stats.extra["import_seconds"] = round(time.perf_counter() - t0, 2)  # engine start, part 1 of 2
        t0 = time.perf_counter()
        self._tokenizer_path = str(tokenizer or model)
        self._hf_tokenizer = None
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._last_refresh = 0.0
        self._start(
            dict(
                model=self.model,
                tokenizer=tokenizer,
                tensor_parallel_size=tensor_parallel_size,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                dtype=dtype,
                load_format=load_format,
                enable_prefix_caching=enable_prefix_caching,
                seed=seed,
                disable_log_stats=False,  # keeps the Prometheus counters (prefix-cache hits) in process
                **engine_kwargs,
            )
        )
        self._counters0 = _prefix_cache_counters()
        self.stats.extra["engine_seconds"] = round(time.perf_counter() - t0, 2)  # LLM(): load, compile, graphs

    def encode_prompt(self, prompt: str) -> list[int]:
        """The token ids vLLM feeds the model for a text prompt (its tokenizer, special tokens added as vLLM
        adds them); rollout reuse compares them with a continuation's ids."""
        if self._hf_tokenizer is None:
            import transformers

            self._hf_tokenizer = transformers.AutoTokenizer.from_pretrained(self._tokenizer_path)
        return self._hf_tokenizer(prompt, add_special_tokens=True)["input_ids"]

    def _start(self, args: dict) -> None:
        """Build the engine from the engine arguments."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def _params(self, req: GenRequest, sampling: SamplingConfig, final_only: bool = False):
        kwargs = dict(
            n=req.n,
            seed=req.seed,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop) or None,
            stop_token_ids=list(sampling.stop_token_ids) or None,
            ignore_eos=sampling.ignore_eos,
        )
        if final_only:
            from vllm.sampling_params import RequestOutputKind

            kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
        return self._vllm.SamplingParams(**kwargs)

    def _completions(self, req: GenRequest, out) -> list[Completion]:
        outs = sorted(out.outputs, key=lambda o: o.index)
        if len(outs) != req.n:
            raise RuntimeError(f"vLLM returned {len(outs)} completions for a request with n={req.n}")
        comps = [
            Completion(o.text, len(o.token_ids), "length" if o.finish_reason == "length" else "stop",
                       tuple(o.token_ids))
            for o in outs
        ]
        with self._lock:
            self.stats.requests += 1
            self.stats.samples += req.n
            self.stats.prompt_tokens += len(out.prompt_token_ids or []) * req.n
            self.stats.generated_tokens += sum(c.num_tokens for c in comps)
        return comps

    def _refresh_cache_stats(self, sample: bool = False) -> None:
        """Prefix-cache hits since this backend started (engine-wide counters, in tokens); with ``sample`` (the
        periodic refresh while work is in flight, never the one at its end) one sample of the engine's gauges."""
        gauges = _engine_gauges()
        with self._lock:
            add_engine_steps(self.stats.extra, gauges)
            if sample:
                add_engine_sample(self.stats.extra, gauges)
        now = _prefix_cache_counters()
        if now is None:
            return
        base = self._counters0 or (0.0, 0.0)  # counters registered after start: they began at zero
        queries, hits = now[0] - base[0], now[1] - base[1]
        with self._lock:
            self.stats.cached_prompt_tokens = int(hits)
            self.stats.extra["prefix_cache_queries"] = int(queries)
            self.stats.extra["prefix_cache_hit_rate"] = round(hits / queries, 4) if queries else None

    def _add_busy(self, seconds: float) -> None:
        with self._lock:
            self.stats.generate_seconds += seconds
            s = self.stats.generate_seconds
            if s > 0:
                self.stats.extra["rollouts_per_s"] = round(self.stats.samples / s, 2)
                self.stats.extra["generated_tokens_per_s"] = round(self.stats.generated_tokens / s, 1)

    # ------------------------------------------------------------------ public API

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """All completions of a batch; with a streaming engine the batch shares the engine with whatever
        else was submitted."""
        return [f.result() for f in self.submit(requests, sampling)]

    def submit(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[Future]:
        """Queue requests on the streaming engine; one Future (-> ``list[Completion]``) per request, in order.

        Needs ``engine="loop"`` or ``"async"``. A group's requests are added back to back so they share the
        prefix cache.
        """
        raise RuntimeError('submit() needs VLLMBackend(..., engine="loop" or "async"); use generate() otherwise.')

    def reset_prefix_cache(self) -> bool:
        """Drop the engine's cached prefixes (benchmarks: each measured mode starts cold)."""
        return self.llm.reset_prefix_cache()

    def close(self) -> None:
        self._refresh_cache_stats()
        self.llm = None


class OfflineVLLMBackend(VLLMBackend):
    """``engine="offline"``: each ``generate`` is one ``LLM.generate`` of the whole batch; no ``submit``."""

    engine_mode = "offline"
    streaming = False

    def _start(self, args: dict) -> None:
        self.llm = self._vllm.LLM(**args)

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        t0 = time.perf_counter()
        order = [i for i in order_by_group(requests) if requests[i].n > 0]
        results: list[list[Completion]] = [[] for _ in requests]
        if order:
            outs = self.llm.generate(
                [requests[i].prompt for i in order],
                [self._params(requests[i], sampling) for i in order],
                use_tqdm=False,
            )
            for i, out in zip(order, outs, strict=True):
                results[i] = self._completions(requests[i], out)
        self._add_busy(time.perf_counter() - t0)
        self._refresh_cache_stats()
        return results


class LoopVLLMBackend(VLLMBackend):
    """``engine="loop"`` (the default): a ``vllm.LLM`` stepped by mcprm's own thread (:class:`_EngineLoop`)."""

    engine_mode = "loop"
    _steps: _EngineLoop | None = None

    def _start(self, args: dict) -> None:
        self.llm = self._vllm.LLM(**args)
        self._steps = _EngineLoop(self)

    def submit(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[Future]:
        return self._steps.submit(requests, sampling)

    def close(self) -> None:
        if self._steps is not None:
            self._steps.stop()
            self._steps = None
        super().close()


class AsyncVLLMBackend(VLLMBackend):
    """``engine="async"``: vLLM's ``AsyncLLM`` on an event loop in a background thread; ``submit`` hands it
    coroutines."""

    engine_mode = "async"

    def _start(self, args: dict) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self._inflight, self._busy_since = 0, 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcprm-vllm-loop", daemon=True)
        self._thread.start()

        if isinstance(args.get("compilation_config"), dict):  # vllm.LLM takes a dict; the engine args want the class
            from vllm.config import CompilationConfig

            args = {**args, "compilation_config": CompilationConfig(**args["compilation_config"])}

        async def _make():
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**args))

        self.engine = asyncio.run_coroutine_threadsafe(_make(), self._loop).result()

    def submit(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[Future]:
        futures: list[Future | None] = [None] * len(requests)
        for i in order_by_group(requests):
            futures[i] = asyncio.run_coroutine_threadsafe(self._agenerate(requests[i], sampling), self._loop)
        return futures

    async def _agenerate(self, req: GenRequest, sampling: SamplingConfig) -> list[Completion]:
        # Runs on the engine's loop thread. generate_seconds counts wall time with >= 1 request in flight.
        if req.n == 0:
            return []
        if self._inflight == 0:
            self._busy_since = time.perf_counter()
        self._inflight += 1
        try:
            final = None
            params = self._params(req, sampling, final_only=True)
            async for out in self.engine.generate(req.prompt, params, f"mcprm-{next(self._ids)}"):
                final = out
            return self._completions(req, final)
        finally:
            self._inflight -= 1
            now = time.perf_counter()
            if self._inflight == 0:
                self._add_busy(now - self._busy_since)
            if self._inflight == 0 or now - self._last_refresh > REFRESH_S:
                self._last_refresh = now
                self._refresh_cache_stats(sample=self._inflight > 0)

    def reset_prefix_cache(self) -> bool:
        return asyncio.run_coroutine_threadsafe(self.engine.reset_prefix_cache(), self._loop).result()

    def close(self) -> None:
        self._refresh_cache_stats()
        if self.engine is not None:
            self.engine.shutdown()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self.engine = None


ENGINE_CLASSES: dict[str, type[VLLMBackend]] = {
    "offline": OfflineVLLMBackend,
    "loop": LoopVLLMBackend,
    "async": AsyncVLLMBackend,
}
assert tuple(sorted(ENGINE_CLASSES)) == tuple(sorted(ENGINES)), "one class per engine name of the registry"


class _EngineLoop:
    """The ``loop`` engine: a thread that owns ``backend.llm`` and steps it while anything is in flight.

    Every engine call happens on this thread. Before each ``step()`` it adds all newly submitted requests, so
    new work joins the running batch within one engine step (continuous batching), exactly as in
    ``LLM.generate``. An engine error fails every pending future and every later ``submit``.
    """

    def __init__(self, backend: LoopVLLMBackend):
        import queue

        self.backend = backend
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: dict[str, tuple[Future, GenRequest]] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mcprm-vllm-steps", daemon=True)
        self._thread.start()

    def submit(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[Future]:
        if self._error is not None:
            raise RuntimeError(f"the vLLM engine loop failed earlier: {self._error!r}") from self._error
        futures: list[Future] = [Future() for _ in requests]
        batch = []
        for i in order_by_group(requests):
            if requests[i].n == 0:
                futures[i].set_result([])
            else:
                batch.append((requests[i], self.backend._params(requests[i], sampling), futures[i]))
        if batch:
            self._q.put(batch)
        return futures

    def stop(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        import queue

        b = self.backend
        engine = b.llm.llm_engine
        busy_since = None
        items: list = []
        try:
            while True:
                idle = not self._pending
                if idle and busy_since is not None:
                    b._add_busy(time.perf_counter() - busy_since)
                    b._refresh_cache_stats()
                    busy_since = None
                batches = []
                try:
                    batches.append(self._q.get(block=idle))  # wait only when the engine has nothing to do
                    while True:
                        batches.append(self._q.get_nowait())
                except queue.Empty:
                    pass
                if any(x is None for x in batches):
                    return
                items = [it for bt in batches for it in bt]
                if items and busy_since is None:
                    busy_since = time.perf_counter()
                for req, params, fut in items:
                    try:
                        rid = b.llm.enqueue([req.prompt], [params], use_tqdm=False)[0]
                    except Exception as e:  # noqa: BLE001 - e.g. a prompt longer than max_model_len:
                        fut.set_exception(e)  # that request fails, the engine goes on
                        continue
                    # enqueue returns vLLM's internal id ("<external>-<8 random chars>"); outputs carry the
                    # external one.
                    self._pending[_external_id(rid)] = (fut, req)
                items = []
                if not engine.has_unfinished_requests():
                    continue
                for out in engine.step():
                    if not out.finished:
                        continue
                    fut, req = self._pending.pop(str(out.request_id), (None, None))
                    if fut is None:
                        raise RuntimeError(f"vLLM returned an output for unknown request id {out.request_id!r}")
                    try:
                        fut.set_result(b._completions(req, out))
                    except Exception as e:  # noqa: BLE001 - a malformed output fails its own request
                        fut.set_exception(e)
                if time.perf_counter() - b._last_refresh > REFRESH_S:
                    b._last_refresh = time.perf_counter()
                    b._refresh_cache_stats(sample=True)
        except BaseException as e:  # noqa: BLE001 - surfaced through the futures
            self._error = e
            for fut in [f for f, _ in self._pending.values()] + [f for _, _, f in items]:
                if not fut.done():
                    fut.set_exception(e)
            self._pending.clear()
            while True:  # fail whatever is still queued
                try:
                    bt = self._q.get_nowait()
                except queue.Empty:
                    break
                for _, _, fut in bt or ():
                    fut.set_exception(e)
        finally:
            if busy_since is not None:
                b._add_busy(time.perf_counter() - busy_since)


def _external_id(internal: str) -> str:
    head, sep, tail = str(internal).rpartition("-")
    return head if sep and len(tail) == 8 else str(internal)
