"""The rollout backends, each describing itself: its name, its options (a documented dataclass, part of
``mcprm label``'s config tree), the resources one worker needs, whether it streams, and how it is built.

Executors, the worker and ``label()`` ask a backend's :class:`BackendSpec` (``BACKENDS[name]``) instead of
branching on its name; adding a backend is one entry here. A backend may take another's options section
(``section``): ``sglang`` runs from the vllm backend's (one set of GPU-engine options, one set of flags). Light
at import: the backend modules (torch, vllm, sglang, httpx) are imported only by ``load()`` / ``build()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import DEFAULT_MAX_MODEL_LEN
from .devices import device_problem, vllm_problem
from .options import HFOptions, OpenAIOptions, VLLMOptions


@dataclass(frozen=True)
class ModelRef:
    """What every backend is built from, whatever its options."""

    model: str
    tokenizer: str | None
    dtype: str | None
    seed: int


@dataclass(frozen=True)
class BackendSpec:
    """One backend, described: see the module docstring."""

    name: str
    summary: str  # one line for `mcprm label --help`
    options: type  # the options dataclass (a section of the config tree)
    load: Callable[[], type]  # the backend class (imports the heavy module)
    build: Callable[[ModelRef, Any], Any]  # (model, options) -> a RolloutBackend
    gpus: Callable[[Any], float] = lambda opts: 0.0  # GPUs one worker holds (0: CPU or a remote server)
    streaming: Callable[[Any], bool] = lambda opts: False  # has submit(): the scheduler streams rounds
    shards_per_worker: int = 1  # shards one worker labels at once (2: no idle tail between shards)
    # where the backend states its engines' capacity (seqs_capacity), the run raises a worker's shards at once up
    # to this many while the worker keeps fewer continuations in flight than its engines run (a binary search keeps
    # one or two per solution in flight: two shards of 64 left a 2,048-sequence engine running under 200)
    most_shards_per_worker: int = 0  # 0: shards_per_worker, fixed
    # continuations in flight under which a probe draws its later waves at once (Scheduler.tail_fill): an
    # engine that batches (vLLM) generates them almost free when it has room; 0 where every token costs time;
    # TAIL_FILL_CAPACITY: the sequences the worker's engines run at once (its backend's seqs_capacity)
    tail_fill: int = 0
    local_model: bool = True  # the model is loaded here (so its context and tokenizer can be checked)
    # completions carry token ids and the backend has encode_prompt(): rollout reuse can be exact (a reused draw is the same tokens);
    # False (a server that returns text only): no reuse
    token_ids: bool = True
    prepare_worker: Callable[[Any, float], None] = lambda opts, cpus: None  # before build, in the worker process
    # why it cannot run on this machine with --device DEVICE, or None (rollouts.devices), said before any work
    machine_problem: Callable[[str], str | None] = lambda device: None
    # the config section its options live in, when it is another backend's (its ``options`` is then that
    # section's class, and pipeline.config makes no section of its own); "": a section of its own, named after it
    section: str = ""


def _hf_class():
    from .hf import HFBackend

    return HFBackend


def _vllm_class():
    from .vllm_backend import VLLMBackend

    return VLLMBackend


def _sglang_class():
    from .sglang_backend import SGLangBackend

    return SGLangBackend


def _openai_class():
    from .openai_backend import OpenAIBackend

    return OpenAIBackend


def _hf_build(m: ModelRef, o: HFOptions):
    return _hf_class()(model_path=m.model, tokenizer_path=m.tokenizer, device=o.device, dtype=m.dtype)


def _hf_prepare(o: HFOptions, cpus: float) -> None:
    if o.device != "cpu":
        return
    try:
        import torch

        torch.set_num_threads(max(1, int(cpus)))  # the hf backend on CPU: torch threads = CPUs per worker
    except ImportError:  # pragma: no cover
        pass


def _vllm_env(o: VLLMOptions) -> dict[str, str]:
    """Environment the engine needs, set before vLLM is imported or its engine process starts."""
    env = {}
    if o.deterministic:
        env["VLLM_BATCH_INVARIANT"] = "1"
    if o.compile_cache:
        import os

        env["VLLM_CACHE_ROOT"] = os.path.abspath(os.path.expanduser(o.compile_cache))
    if o.vllm_inproc:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return env


def _vllm_prepare(o: VLLMOptions, cpus: float) -> None:
    import os

    os.environ.update(_vllm_env(o))


def engines_per_gpu(o: VLLMOptions, model: str, dtype: str | None = None) -> int:
    """``--engines-per-gpu`` as given, or for 0 (auto) the count :func:`rollouts.engine_sizing.auto_engines_per_gpu`
    picks from the model (a local folder's config.json) and this process's GPU; one whatever the sizes where
    several engines are not possible (tensor parallelism, the offline engine) or not measured (the deterministic
    mode's batch invariance)."""
    if o.engines_per_gpu >= 1:
        return o.engines_per_gpu
    if o.tensor_parallel_size > 1 or o.vllm_engine == "offline" or o.deterministic:
        return 1
    from .engine_sizing import auto_engines_per_gpu, gpu_memory_bytes, model_shape

    gpu = gpu_memory_bytes()
    return auto_engines_per_gpu(model_shape(model, dtype), gpu[0] if gpu else None, gpu[1] if gpu else "")


def engines_here(o: VLLMOptions, model: str = "", dtype: str | None = None) -> int:
    """Engines this worker runs: the GPU's engine count on a whole GPU, one where Ray gave the worker a fraction of
    one (the other engines of that GPU are other workers)."""
    n = engines_per_gpu(o, model, dtype)
    if n <= 1:
        return 1
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            got = ray.get_runtime_context().get_assigned_resources().get("GPU")
        except Exception:  # noqa: BLE001 - not in a Ray worker (the driver): a whole GPU
            got = None
        if got is not None and got < 1:
            return 1
    return n


def vllm_engine_settings(m: ModelRef, o: VLLMOptions):
    """Each engine's settings from the model (a local folder's config.json), this worker's GPU (NVML) and the
    options (:func:`rollouts.engine_sizing.engine_settings`; what is not known is left to vLLM)."""
    from .engine_sizing import engine_settings, gpu_memory_bytes, model_shape

    gpu = gpu_memory_bytes()
    return engine_settings(model_shape(m.model, m.dtype), gpu[0] if gpu else None,
                           engines_per_gpu=engines_per_gpu(o, m.model, m.dtype), gpu_memory_utilization=o.gpu_memory_utilization,
                           seq_tokens=o.max_model_len or DEFAULT_MAX_MODEL_LEN, max_num_seqs=o.max_num_seqs,
                           max_num_batched_tokens=o.max_num_batched_tokens, gpu_name=gpu[1] if gpu else "",
                           start_together=o.engine_start == "together",
                           # the deterministic mode keeps the capture sizes its batch invariance was measured with
                           cuda_graph_max=0 if o.deterministic and o.cuda_graph_max is None else o.cuda_graph_max)


def _vllm_build(m: ModelRef, o: VLLMOptions):
    _vllm_prepare(o, 0)
    settings = vllm_engine_settings(m, o)
    kw: dict[str, Any] = dict(model=m.model, tokenizer=m.tokenizer, tensor_parallel_size=o.tensor_parallel_size,
                              seed=m.seed, engine=o.vllm_engine, **settings.engine_kwargs())
    if o.max_model_len:
        kw["max_model_len"] = o.max_model_len
    if o.cuda_graph_mode:
        kw["compilation_config"] = {**kw.get("compilation_config", {}),
                                    "cudagraph_mode": o.cuda_graph_mode.replace("-", "_").upper()}
    if m.dtype:
        kw["dtype"] = m.dtype
    if o.load_format != "auto":
        kw["load_format"] = o.load_format
    if o.deterministic:
        # batch-invariant kernels do not cover a prefix served from the cache (measured: 1 request in 12 changed
        # its text on a cache hit, H200), so the deterministic mode recomputes every prefix
        kw["enable_prefix_caching"] = False
    if o.tensor_parallel_size > 1:
        kw["distributed_executor_backend"] = "mp"  # inside a Ray actor: the actor's own GPUs, no placement group
    import logging

    logging.getLogger("mcprm").info("vllm engines: %s", settings.describe())
    if settings.engines_per_gpu == 1:
        b = _vllm_class()(**kw)  # one engine per GPU: nothing else starts on it
        b.seqs_capacity = settings.seqs_limit  # what the labeling worker's demand is measured against
        return b
    from .engine_sizing import gpu_start_lock

    engines = []
    try:
        for _ in range(engines_here(o, m.model, m.dtype)):
            # a KV cache given needs no measure of the free memory, so no other engine's start to wait for
            with contextlib.nullcontext() if settings.starts_at_once else gpu_start_lock():
                engines.append(_vllm_class()(**kw))
    except BaseException:
        for e in engines:
            e.close()
        raise
    for e in engines:
        e.seqs_capacity = settings.seqs_limit
    if len(engines) == 1:
        return engines[0]
    from .multi_engine import MultiEngineBackend

    multi = MultiEngineBackend(engines)
    multi.seqs_capacity = settings.seqs_limit * len(engines) if settings.seqs_limit else None
    return multi


def _sglang_build(m: ModelRef, o: VLLMOptions):
    """The sglang backend from the vllm backend's options: the same meaning under sglang's names (tensor
    parallelism, memory share, context, weight loading, deterministic inference); the vllm-only ones (engine,
    in-process core, compile cache) do not apply."""
    kw: dict[str, Any] = dict(model=m.model, tokenizer=m.tokenizer, tp_size=o.tensor_parallel_size,
                              mem_fraction_static=o.gpu_memory_utilization, context_length=o.max_model_len,
                              dtype=m.dtype or "auto", seed=m.seed, deterministic=o.deterministic)
    if o.load_format != "auto":
        kw["load_format"] = o.load_format
    return _sglang_class()(**kw)


def _sglang_problem(device: str) -> str | None:
    from .sglang_backend import sglang_problem  # light: no sglang, no torch

    return sglang_problem(device)


def _openai_build(m: ModelRef, o: OpenAIOptions):
    return _openai_class()(base_url=o.base_url, model=m.model, api_key=o.api_key)


# BackendSpec.tail_fill: draw ahead while the worker's engines have free sequence slots, as many as they run at once
# (on one H200 with the real 1.5B, one engine drawing ahead under its 2,048 with every shard at once gave 1.23x the
# tok/s of 256 with shards raised from 2, for 4% more tokens: BENCHMARKS, "Engine levers on one H200");
# TAIL_FILL_FALLBACK, the earlier default, where the backend states no capacity
TAIL_FILL_CAPACITY = -1
TAIL_FILL_FALLBACK = 256

BACKENDS: dict[str, BackendSpec] = {
    s.name: s
    for s in (
        BackendSpec("hf", "transformers, CPU or GPU", HFOptions, _hf_class, _hf_build, prepare_worker=_hf_prepare,
                    machine_problem=device_problem),
        BackendSpec("vllm", "GPUs", VLLMOptions, _vllm_class, _vllm_build,
                    gpus=VLLMOptions.worker_gpus,
                    streaming=lambda o: o.vllm_engine != "offline",
                    # vLLM's engine takes the requests of two shards at once (no idle tail between shards);
                    # the hf backend is not thread-safe, so its worker runs one shard at a time.
                    shards_per_worker=2, most_shards_per_worker=32, tail_fill=TAIL_FILL_CAPACITY, prepare_worker=_vllm_prepare,
                    machine_problem=vllm_problem),
        BackendSpec("openai", "an OpenAI-compatible server, --base-url", OpenAIOptions, _openai_class,
                    _openai_build, local_model=False, token_ids=False),
        # offline (one generate per round, no streaming, no drawing ahead) and one shard per worker until a GPU
        # run says more; its options are the vllm section's (rollouts/sglang_backend.py)
        BackendSpec("sglang", "GPUs", VLLMOptions, _sglang_class, _sglang_build, section="vllm",
                    gpus=lambda o: float(o.tensor_parallel_size), machine_problem=_sglang_problem),
    )
}


def backend_spec(name: str) -> BackendSpec:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"Unknown rollout backend {name!r}; choose one of {', '.join(BACKENDS)}.") from None


def backend_problem(backend: str, device: str = "cpu", remote: bool = False) -> str | None:
    """Why ``backend`` cannot run on this machine (its :attr:`BackendSpec.machine_problem`), or None; None for
    a name the registry does not know (said where the backend is built). ``remote``: the workers run on a Ray
    cluster (``--ray-address``), whose machines are not this one, so nothing is checked here."""
    spec = BACKENDS.get(backend)
    return None if remote or spec is None else spec.machine_problem(device)
