"""The declaration of an option (:func:`option`: a config field with its documentation) and the backends' option
sections: :class:`HFOptions`, :class:`VLLMOptions` (the sglang backend runs from it too), :class:`OpenAIOptions`.

Every option of ``mcprm label`` and ``mcprm train`` is declared with :func:`option`: its default, its help, its
CLI spelling and its part in a corpus's identity, in one place; the help, the docs table and the run files are
made from it. A backend's section is named after its backend (the class ``VLLMOptions`` is the section ``vllm``);
which backend uses which section is said by its spec (:mod:`rollouts.registry`). Light: no backend module here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import DEFAULT_ENGINES_PER_GPU, DEFAULT_VLLM_ENGINE, VLLM_ENGINES

# vLLM's CUDA graph modes (CompilationConfig.cudagraph_mode), spelled as options: vLLM's default captures full
# graphs for pure decode steps and runs a step that also prefills piecewise; a labeling engine, whose sequences
# stop at their own lengths and are replaced at once, runs mostly such mixed steps
CUDA_GRAPH_MODES = ("full", "full-and-piecewise", "piecewise", "full-decode-only", "none")
# how several engines of one GPU start: one-by-one (each measures the memory left free for its KV cache, under the
# GPU's start lock) or together (each KV cache given from the sizing's estimate, no lock). One-by-one is the
# default: together, on a cold machine with two engines of the real 1.5B, labeled at a tenth of one-by-one's rate
# and the cause is not found yet (BENCHMARKS.md, "Engine levers on one H200")
ENGINE_STARTS = ("one-by-one", "together")


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Callable[[], Any] | None = None,
           **meta: Any) -> Any:
    """A config field and its documentation in one place: ``help`` is what ``mcprm label --help`` says.

    ``meta``: ``identity=True`` (the field changes what a label means: part of the corpus identity;
    ``identity="non-default"`` for an option added later: part of it only when set, so that corpora written
    before it existed keep their identity; with ``legacy=V``, part of it unless set to V, the behaviour before
    the option existed, when its default is not that; ``strategy_option=True``: read only by the labeling
    strategies whose registry entry names it, ``Strategy.reads``; the others ignore it),
    ``flags=("--input", "-i")`` (its CLI spelling, default ``--name``), ``cli=False`` (run files only),
    ``choices`` (allowed values), ``shown`` (the default as people read it, for a None default),
    ``envvar``."""
    md = {"help": help, **meta}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=md)
    return dataclasses.field(default=default, metadata=md)


def field_default(f: dataclasses.Field) -> Any:
    """The default an :func:`option` field declares (a fresh one for a ``factory``)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


@dataclass
class HFOptions:
    """Options of the ``hf`` backend (transformers, CPU or GPU)."""

    device: str = option("cpu", "hf backend: cpu | cuda.")

    def problems(self, active: bool) -> list[str]:
        return []


@dataclass
class VLLMOptions:
    """Options of the ``vllm`` backend (GPUs), which the ``sglang`` backend runs from too (its ``section``): the
    fields whose help names sglang mean the same there, the others are vLLM's own."""

    tensor_parallel_size: int = option(1, "vllm, sglang: GPUs per model replica (one actor each).")
    gpu_memory_utilization: float = option(0.85, "vllm, sglang: share of each GPU's memory the engine may take "
                                                 "(sglang's mem_fraction_static: weights and KV cache).", cli=False)
    max_model_len: int | None = option(None, "The model's context in tokens (prompt-length check; vllm, "
                                             "sglang: the engine's limit).", shown="the model config's")
    load_format: str = option("auto", "vllm, sglang: weight loading; 'dummy' = random weights (benchmarks).",
                              identity=True, cli=False)
    vllm_engine: str = option(DEFAULT_VLLM_ENGINE, "vllm: loop (streaming), async (vLLM's AsyncLLM) or offline "
                                                   "(a call per round).", choices=VLLM_ENGINES)
    deterministic: bool = option(False, "Texts independent of the batch. vllm: batch-invariant kernels, no "
                                        "prefix cache (slower); sglang: seeded too.")
    compile_cache: str | None = option(None, "vllm: compiled graphs' cache (local to a node).",
                                       shown="~/.cache/vllm")
    vllm_inproc: bool = option(False, "vllm: the engine core in the worker's process: faster starts, "
                                      "fewer tokens/s (BENCHMARKS.md).")
    engines_per_gpu: int = option(DEFAULT_ENGINES_PER_GPU, "vllm: engines per GPU.",
                                  shown="0: sized")
    max_num_seqs: int | None = option(None, "vllm: sequences per engine step.",
                                      shown="vLLM's")
    max_num_batched_tokens: int | None = option(None, "vllm: tokens per engine step.",
                                                shown="vLLM's")
    cuda_graph_max: int | None = option(None, "vllm: CUDA graphs up to this batch; 0: vLLM's 512.",
                                        shown="the sequence limit")
    cuda_graph_mode: str | None = option(None, "vllm: full = graphs for mixed steps too.", shown="vLLM's",
                                         choices=CUDA_GRAPH_MODES)
    engine_start: str = option("one-by-one", "vllm: a GPU's engines start one-by-one or together "
                                             "(KV caches given).", choices=ENGINE_STARTS)

    def problems(self, active: bool) -> list[str]:
        out = []
        if self.vllm_inproc and self.vllm_engine == "async":
            out.append("--vllm-inproc needs --vllm-engine loop or offline (vLLM's AsyncLLM runs its engine core "
                       "in a process of its own)")
        if self.vllm_engine not in VLLM_ENGINES:
            out.append(f"--vllm-engine must be one of {', '.join(VLLM_ENGINES)}, got {self.vllm_engine!r}")
        if self.tensor_parallel_size < 1:
            out.append(f"--tensor-parallel-size must be at least 1, got {self.tensor_parallel_size}")
        if not 0 < self.gpu_memory_utilization <= 1:
            out.append(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.engines_per_gpu < 0:
            out.append(f"--engines-per-gpu must be 0 (sized from the model and the GPU) or more, got "
                       f"{self.engines_per_gpu}")
        elif self.engines_per_gpu > 1 and self.tensor_parallel_size > 1:
            out.append(f"--engines-per-gpu {self.engines_per_gpu} needs --tensor-parallel-size 1 (an engine spread "
                       "over several GPUs cannot share them by fractions)")
        elif self.engines_per_gpu > 1 and self.vllm_engine == "offline":
            out.append(f"--engines-per-gpu {self.engines_per_gpu} needs a streaming engine (--vllm-engine loop, "
                       "the default, or async)")
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            v = getattr(self, name)
            if v is not None and v < 1:
                out.append(f"--{name.replace('_', '-')} must be at least 1, got {v}")
        if self.cuda_graph_max is not None and self.cuda_graph_max < 0:
            out.append(f"--cuda-graph-max must be 0 (vLLM's own) or more, got {self.cuda_graph_max}")
        if self.engine_start not in ENGINE_STARTS:
            out.append(f"--engine-start must be one of {', '.join(ENGINE_STARTS)}, got {self.engine_start!r}")
        if self.cuda_graph_mode is not None and self.cuda_graph_mode not in CUDA_GRAPH_MODES:
            out.append(f"--cuda-graph-mode must be one of {', '.join(CUDA_GRAPH_MODES)}, got {self.cuda_graph_mode!r}")
        return out

    def worker_gpus(self) -> float:
        """GPUs one vLLM worker holds: its tensor-parallel GPUs, or 1/N of one with N engines per GPU."""
        return float(self.tensor_parallel_size) / max(1, self.engines_per_gpu)


@dataclass
class OpenAIOptions:
    """Options of the ``openai`` backend (an OpenAI-compatible server)."""

    base_url: str | None = option(None, "openai backend: server URL, e.g. http://127.0.0.1:8000/v1 (key: "
                                        "OPENAI_API_KEY).")
    api_key: str | None = option(None, "openai backend: API key (default: OPENAI_API_KEY); never written to "
                                       "manifests.", cli=False, secret=True)

    def problems(self, active: bool) -> list[str]:
        if active and not self.base_url:
            return ["--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)"]
        return []
