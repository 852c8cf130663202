"""SGLang backend (GPU): ``sglang.Engine`` driven offline, one ``Engine.generate`` per batch, like
:class:`rollouts.vllm_backend.OfflineVLLMBackend` (no ``submit()``: the scheduler runs rounds, not a stream).
Registered in ``rollouts.registry`` as ``--backend sglang``; its options are the vllm
backend's section (``--tensor-parallel-size``, ``--max-model-len``, ``--deterministic``, the run file's
``gpu_memory_utilization`` and ``load_format``), so the two engines run from one set of options.

Written against sglang 0.5.17, the newest release that pins the GPU image's torch 2.11.0 (0.5.23 pins torch
2.14.1; docs/gpus.md, "SGLang"). ``sglang`` is imported only when a backend is built; its install on the lent
machine is ``bench/sglang_try.sh``, and ``bench/gpu_e2e/sglang_label.sh`` labels the same solutions through both
engines.

* A request's ``n`` samples are sent as ``n`` adjacent requests with the same prompt (sglang's radix cache
  computes the shared prefix once), a group's requests next to each other, as in the vLLM backend.
* Seeds: sglang honours a per-request ``sampling_seed`` only with ``enable_deterministic_inference`` (the
  ``deterministic`` option); otherwise its samples are NOT reproducible from ``GenRequest.seed``: a rerun of the
  same input gives other samples, so other labels (vLLM takes every request's seed in either mode, though its
  samples may still change with the batch without ``--deterministic``). sglang documents its deterministic
  mode as covering its radix cache (FA3, Triton and FlashInfer attention), so the cache stays on; not measured.
* Completions carry sglang's generated token ids (``output_ids``) and :meth:`SGLangBackend.encode_prompt` gives
  a prompt's ids (the model's tokenizer, special tokens added as sglang's tokenizer manager adds them), so
  rollout reuse works as with vLLM.
* ``sampling_backend="pytorch"`` by default: the flashinfer sampler is compiled at first use (nvcc, minutes),
  and the vLLM backend's sampling is PyTorch's too (``VLLM_USE_FLASHINFER_SAMPLER=0``).
* One ``Engine.generate`` at a time (a lock): the engine runs each call on its own asyncio loop, which two
  threads cannot run at once. A worker labels one shard at a time (the registry's default); with ``--shards-per-worker
  2`` two shards take turns on the lock (one's grading beside the other's generation): not run on a GPU.
* vllm-only options of the shared section (``--vllm-engine``, ``--vllm-inproc``, ``--compile-cache``) are
  ignored here.

Verified on CPU only (tests/rollouts/test_sglang.py, a stand-in ``sglang`` module whose ``Engine`` answers by
script): the module and the registry import without sglang or torch; the registry entry, its options (the vllm
section's checks) and how they reach ``sglang.Engine``; the machine check and the install hint; the batching,
seeds, token ids, counters and the one-call-at-a-time lock; and a shard labeled through ``ShardWorker`` with
``--backend sglang``, rollout reuse counting from the engine's token ids and ``encode_prompt``. PENDING: a
labeling run on a GPU (``bench/gpu_e2e/sglang_label.sh``); the real ``sglang.Engine`` has run on an H100 only in
``bench/sglang_try.sh``'s benchmark, outside mcprm.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from .base import Completion, Counters, GenRequest, SamplingConfig, order_by_group, require

_SGLANG_HINT = "pip install 'sglang==0.5.17' (needs a CUDA GPU and torch 2.11); see bench/sglang_try.sh"


def sglang_problem(device: str = "cpu") -> str | None:
    """Why the sglang backend cannot run on this machine (``device`` is not its choice: NVIDIA GPUs), or None.
    Imports nothing heavy."""
    from .devices import gpu_engine_problem

    return gpu_engine_problem("sglang", _SGLANG_HINT)


def _finish(meta: dict) -> str:
    reason = meta.get("finish_reason") or {}
    kind = reason.get("type") if isinstance(reason, dict) else str(reason)
    if kind == "abort":
        raise RuntimeError(f"sglang aborted a request: {reason.get('message', reason)}")
    return "length" if kind == "length" else "stop"


class SGLangBackend:
    """Rollouts with ``sglang.Engine`` (offline: one ``generate`` per batch); see the module docstring.
    ``engine_kwargs`` go to ``sglang.Engine`` (sglang's ``ServerArgs``), e.g. ``load_format="dummy"``."""

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
        self._lock = threading.Lock()  # the counters
        self._engine_lock = threading.Lock()  # one Engine.generate at a time (the module docstring)
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
        """All completions of a batch: one ``Engine.generate`` of every sample (``n`` adjacent copies of a request's
        prompt, a group's requests together); list i holds ``requests[i].n`` completions."""
        order = [i for i in order_by_group(requests) if requests[i].n > 0]
        flat = [(i, j) for i in order for j in range(requests[i].n)]
        results: list[list[Completion]] = [[] for _ in requests]
        if not flat:
            return results
        prompts = [requests[i].prompt for i, _ in flat]
        params = [self._params(requests[i], sampling, j) for i, j in flat]
        with self._engine_lock:
            t0 = time.perf_counter()
            outs = self.engine.generate(prompt=prompts, sampling_params=params)
            self._add_busy(time.perf_counter() - t0)
        if len(outs) != len(flat):
            raise RuntimeError(f"sglang returned {len(outs)} outputs for {len(flat)} samples")
        prompt_tokens = cached = 0
        for (i, _), out in zip(flat, outs, strict=True):
            meta = out["meta_info"]
            ids = out.get("output_ids")  # absent: no token ids, so no rollout reuse for this continuation
            results[i].append(Completion(out["text"], int(meta["completion_tokens"]), _finish(meta),
                                         None if ids is None else tuple(ids)))
            prompt_tokens += int(meta.get("prompt_tokens", 0))
            cached += int(meta.get("cached_tokens", 0))
        with self._lock:
            self.stats.requests += len(order)
            self.stats.samples += len(flat)
            self.stats.prompt_tokens += prompt_tokens
            self.stats.cached_prompt_tokens += cached
            self.stats.generated_tokens += sum(c.num_tokens for i in order for c in results[i])
            self._rates()
        return results

    def _add_busy(self, seconds: float) -> None:
        with self._lock:
            self.stats.generate_seconds += seconds

    def _rates(self) -> None:
        """``stats.extra``'s rates, as the vLLM backend reports them (called with ``_lock`` held)."""
        s = self.stats.generate_seconds
        if s > 0:
            self.stats.extra["rollouts_per_s"] = round(self.stats.samples / s, 2)
            self.stats.extra["generated_tokens_per_s"] = round(self.stats.generated_tokens / s, 1)
        if self.stats.prompt_tokens:
            self.stats.extra["prefix_cache_hit_rate"] = round(self.stats.cached_prompt_tokens / self.stats.prompt_tokens, 4)

    def close(self) -> None:
        if getattr(self, "engine", None) is not None:
            self.engine.shutdown()
            self.engine = None
