"""SGLang backend (GPU), a DRAFT for issue 29 item 4: not registered in ``rollouts.registry`` and never run on a
GPU yet. It follows :class:`rollouts.vllm_backend.OfflineVLLMBackend`: one ``sglang.Engine.generate`` per batch.

Written against sglang 0.5.17, the newest release that pins the GPU image's torch 2.11.0 (0.5.23 pins torch
2.14.1; docs/gpus.md, "SGLang"). ``sglang`` is imported only when a backend is built; its install on the lent
machine is ``bench/sglang_try.sh``.

* A request's ``n`` samples are sent as ``n`` adjacent requests with the same prompt (sglang's radix cache
  computes the shared prefix once), a group's requests next to each other, as in the vLLM backend.
* Seeds: sglang honours a per-request ``sampling_seed`` only with ``enable_deterministic_inference`` (the
  ``deterministic`` option here); otherwise its samples are not reproducible from ``GenRequest.seed``.
* ``sampling_backend="pytorch"`` by default: the flashinfer sampler is compiled at first use (nvcc, minutes),
  and the vLLM backend's sampling is PyTorch's too (``VLLM_USE_FLASHINFER_SAMPLER=0``).

To register it once it has run (one entry in ``rollouts/registry.py``)::

    BackendSpec("sglang", "GPUs (SGLang)", SGLangOptions, _sglang_class, _sglang_build,
                gpus=lambda o: float(o.tp_size))
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Completion, Counters, GenRequest, SamplingConfig, require

_SGLANG_HINT = "pip install 'sglang==0.5.17' (needs a CUDA GPU and torch 2.11); see bench/sglang_try.sh"


@dataclass
class SGLangOptions:
    """Options of the (draft) ``sglang`` backend, shaped like the registry's ``VLLMOptions``."""

    tp_size: int = 1
    mem_fraction_static: float = 0.85
    context_length: int | None = None
    attention_backend: str | None = None  # sglang's default: fa3 on Hopper
    sampling_backend: str = "pytorch"
    deterministic: bool = False

    def problems(self, active: bool) -> list[str]:
        out = []
        if self.tp_size < 1:
            out.append(f"tp_size must be at least 1, got {self.tp_size}")
        if not 0 < self.mem_fraction_static <= 1:
            out.append(f"mem_fraction_static must be in (0, 1], got {self.mem_fraction_static}")
        return out


def _order_by_group(requests: Sequence[GenRequest]) -> list[int]:
    """Indices with each group's requests adjacent, groups in order of first appearance (stable)."""
    first: dict[str, int] = {}
    for i, r in enumerate(requests):
        first.setdefault(r.group, i)
    return sorted(range(len(requests)), key=lambda i: (first[requests[i].group], i))


def _finish(meta: dict) -> str:
    reason = meta.get("finish_reason") or {}
    kind = reason.get("type") if isinstance(reason, dict) else str(reason)
    if kind == "abort":
        raise RuntimeError(f"sglang aborted a request: {reason.get('message', reason)}")
    return "length" if kind == "length" else "stop"


class SGLangBackend:
    """Rollouts with ``sglang.Engine`` (offline: one ``generate`` per batch). DRAFT: see the module docstring."""

    name = "sglang"
    streaming = False

    def __init__(self, model: str, tokenizer: str | None = None, tp_size: int = 1, mem_fraction_static: float = 0.85,
                 context_length: int | None = None, dtype: str = "auto", seed: int = 0,
                 attention_backend: str | None = None, sampling_backend: str = "pytorch",
                 deterministic: bool = False, **engine_kwargs):
        t0 = time.perf_counter()
        self._sgl = require("sglang", _SGLANG_HINT)
        self.model = str(model)
        self.stats = Counters()
        self.stats.extra["import_seconds"] = round(time.perf_counter() - t0, 2)
        self._tokenizer_path = str(tokenizer or model)
        self._hf_tokenizer = None
        self._deterministic = deterministic
        self._lock = threading.Lock()
        self._ids = itertools.count()
        kw = dict(model_path=self.model, tokenizer_path=tokenizer, tp_size=tp_size,
                  mem_fraction_static=mem_fraction_static, dtype=dtype, random_seed=seed,
                  sampling_backend=sampling_backend, log_level="warning",
                  enable_deterministic_inference=deterministic, **engine_kwargs)
        if context_length:
            kw["context_length"] = context_length
        if attention_backend:
            kw["attention_backend"] = attention_backend
        t0 = time.perf_counter()
        self.engine = self._sgl.Engine(**kw)
        self.stats.extra["engine_seconds"] = round(time.perf_counter() - t0, 2)

    def encode_prompt(self, prompt: str) -> list[int]:
        """The token ids the engine feeds the model for a text prompt (the model's HF tokenizer, special tokens
        added as sglang's tokenizer manager adds them)."""
        if self._hf_tokenizer is None:
            import transformers

            self._hf_tokenizer = transformers.AutoTokenizer.from_pretrained(self._tokenizer_path)
        return self._hf_tokenizer(prompt, add_special_tokens=True)["input_ids"]

    def _params(self, req: GenRequest, sampling: SamplingConfig, i: int) -> dict:
        p = {
            "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "ignore_eos": sampling.ignore_eos,
        }
        if sampling.stop:
            p["stop"] = list(sampling.stop)
        if sampling.stop_token_ids:
            p["stop_token_ids"] = list(sampling.stop_token_ids)
        if self._deterministic:
            p["sampling_seed"] = (req.seed + i) % (2**63)  # the i-th sample's seed, as vLLM derives it
        return p

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        t0 = time.perf_counter()
        order = [i for i in _order_by_group(requests) if requests[i].n > 0]
        flat = [(i, j) for i in order for j in range(requests[i].n)]
        results: list[list[Completion]] = [[] for _ in requests]
        if flat:
            outs = self.engine.generate(
                prompt=[requests[i].prompt for i, _ in flat],
                sampling_params=[self._params(requests[i], sampling, j) for i, j in flat],
            )
            if len(outs) != len(flat):
                raise RuntimeError(f"sglang returned {len(outs)} outputs for {len(flat)} samples")
            prompt_tokens = cached = 0
            for (i, _), out in zip(flat, outs, strict=True):
                meta = out["meta_info"]
                ids = tuple(out.get("output_ids") or ())
                results[i].append(Completion(out["text"], int(meta["completion_tokens"]), _finish(meta), ids))
                prompt_tokens += int(meta.get("prompt_tokens", 0))
                cached += int(meta.get("cached_tokens", 0))
            with self._lock:
                self.stats.requests += len(order)
                self.stats.samples += len(flat)
                self.stats.prompt_tokens += prompt_tokens
                self.stats.cached_prompt_tokens += cached
                self.stats.generated_tokens += sum(c.num_tokens for i in order for c in results[i])
        self._add_busy(time.perf_counter() - t0)
        return results

    def _add_busy(self, seconds: float) -> None:
        with self._lock:
            self.stats.generate_seconds += seconds
            s = self.stats.generate_seconds
            if s > 0:
                self.stats.extra["rollouts_per_s"] = round(self.stats.samples / s, 2)
                self.stats.extra["generated_tokens_per_s"] = round(self.stats.generated_tokens / s, 1)
            if self.stats.prompt_tokens:
                self.stats.extra["prefix_cache_hit_rate"] = round(
                    self.stats.cached_prompt_tokens / self.stats.prompt_tokens, 4)

    def close(self) -> None:
        if getattr(self, "engine", None) is not None:
            self.engine.shutdown()
            self.engine = None


def _sglang_class():
    return SGLangBackend


def _sglang_build(m, o: SGLangOptions) -> SGLangBackend:
    """(registry.ModelRef, SGLangOptions) -> backend; for the registry entry in the module docstring."""
    return SGLangBackend(model=m.model, tokenizer=m.tokenizer, tp_size=o.tp_size,
                         mem_fraction_static=o.mem_fraction_static, context_length=o.context_length,
                         dtype=m.dtype or "auto", seed=m.seed, attention_backend=o.attention_backend,
                         sampling_backend=o.sampling_backend, deterministic=o.deterministic)
