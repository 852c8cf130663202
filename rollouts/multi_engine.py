"""Several streaming engines in one worker, seen as one backend: what ``--engines-per-gpu N`` gives a worker that
holds a whole GPU (the in-process executor; a Ray worker holds 1/N of a GPU and runs one engine instead).

Requests are dealt out by group: a group (one solution's step prefixes) is sent to one engine for as long as this
backend remembers it, so its shared prefix stays in that engine's prefix cache; a new group goes to the engine
with the fewest samples in flight. A request's samples depend only on the request (its prompt, seed and n;
:class:`rollouts.base.GenRequest`), not on which engine draws them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future

from .base import ENGINE_SAMPLE_KEYS, Completion, Counters, GenRequest, SamplingConfig, order_by_group

# groups whose engine is remembered: a solution's rounds come within a shard, so the most recent ones are enough,
# and the map stays small on a million-solution run
REMEMBERED_GROUPS = 65536


class MultiEngineBackend:
    """``engines``: backends with ``submit`` (vLLM's ``loop`` or ``async`` engines), built by the caller."""

    streaming = True

    def __init__(self, engines: Sequence):
        if not engines:
            raise ValueError("MultiEngineBackend needs at least one engine")
        if not all(getattr(e, "streaming", False) for e in engines):
            raise ValueError("several engines per worker need streaming engines (--vllm-engine loop or async)")
        self.engines = list(engines)
        self.name = getattr(engines[0], "name", "vllm")
        self.model = getattr(engines[0], "model", None)
        self._lock = threading.Lock()
        self._inflight = [0] * len(self.engines)  # samples submitted and not finished, per engine
        self._home: OrderedDict[str, int] = OrderedDict()  # group -> engine

    # ------------------------------------------------------------------ dispatch
    def _engine_for(self, group: str) -> int:
        i = self._home.get(group)
        if i is None:
            i = min(range(len(self.engines)), key=lambda j: (self._inflight[j], j))
            self._home[group] = i
            if len(self._home) > REMEMBERED_GROUPS:
                self._home.popitem(last=False)
        else:
            self._home.move_to_end(group)
        return i

    def submit(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[Future]:
        per: dict[int, list[int]] = {}
        with self._lock:
            for i in order_by_group(requests):
                e = self._engine_for(requests[i].group)
                per.setdefault(e, []).append(i)
                self._inflight[e] += requests[i].n
        futures: list[Future | None] = [None] * len(requests)
        for e, idx in per.items():
            for i, f in zip(idx, self.engines[e].submit([requests[i] for i in idx], sampling), strict=True):
                f.add_done_callback(lambda _f, e=e, n=requests[i].n: self._finished(e, n))
                futures[i] = f
        return futures

    def _finished(self, engine: int, n: int) -> None:
        with self._lock:
            self._inflight[engine] -= n

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        return [f.result() for f in self.submit(requests, sampling)]

    # ------------------------------------------------------------------ the rest of a backend
    @property
    def stats(self) -> Counters:
        """The engines' counters added up; ``generate_seconds`` is the longest engine's (they run at once), so
        the rates are the worker's; the prefix-cache counts are the process's; ``extra["engines"]`` keeps each
        engine's own."""
        tot = Counters()
        per = [e.stats for e in self.engines]
        for s in per:
            tot.requests += s.requests
            tot.rollouts += s.rollouts
            tot.rollout_tokens += s.rollout_tokens
            tot.prompt_tokens += s.prompt_tokens
        # vLLM's prefix-cache counters live in the process's one Prometheus registry, not per engine: each engine
        # reads the same process-wide figures (or, where a later engine's metrics replaced an earlier one's,
        # that engine's only), so the largest is taken, never the sum; one engine per process (Ray) is exact
        tot.cached_prompt_tokens = max(s.cached_prompt_tokens for s in per)
        queries = [s.extra.get("prefix_cache_queries") for s in per if s.extra.get("prefix_cache_queries")]
        if queries:
            tot.extra["prefix_cache_queries"] = max(queries)
            tot.extra["prefix_cache_hit_rate"] = round(tot.cached_prompt_tokens / max(queries), 4)
        tot.generate_seconds = max(s.generate_seconds for s in per)
        if tot.generate_seconds > 0:
            tot.extra["rollouts_per_s"] = round(tot.rollouts / tot.generate_seconds, 2)
            tot.extra["generated_tokens_per_s"] = round(tot.rollout_tokens / tot.generate_seconds, 1)
        # the engines' gauges are the process's too (rollouts.vllm_backend.add_engine_sample): each engine sampled
        # the same registry, so the figures of the one that sampled most stand for the worker, never a sum
        sampled = max(per, key=lambda s: s.extra.get("engine_samples", 0))
        for key in (*ENGINE_SAMPLE_KEYS, "engine_running_max", "kv_cache_usage_max"):
            if key in sampled.extra:
                tot.extra[key] = sampled.extra[key]
        for key in ("import_seconds", "engine_seconds"):  # started one after another: the worker's start is the sum
            vals = [s.extra.get(key) for s in per if s.extra.get(key) is not None]
            if vals:
                tot.extra[key] = round(sum(vals), 2)
        tot.extra["engines"] = [s.as_dict() for s in per]
        return tot

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.engines[0].encode_prompt(prompt)

    def reset_prefix_cache(self) -> bool:
        return all([e.reset_prefix_cache() for e in self.engines])

    def close(self) -> None:
        errors = []
        for e in self.engines:
            try:
                e.close()
            except Exception as exc:  # noqa: BLE001 - close every engine, then say what failed
                errors.append(exc)
        if errors:
            raise errors[0]
