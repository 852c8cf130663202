"""Generation backends: K independent continuations per prompt (``hf``, ``vllm``, ``openai``).

``import rollouts`` is light: torch / transformers / vllm / httpx are imported only when a backend is built.
"""

from __future__ import annotations

from .base import (
    BackendStats,
    Completion,
    Counters,
    GenRequest,
    MissingDependency,
    RolloutBackend,
    SamplingConfig,
    require,
)
from .prompts import PromptFormat, make_prompt_format
from .registry import BACKENDS, BackendSpec, backend_spec


def make_backend(name: str, **kwargs) -> RolloutBackend:
    """Build a backend by name (:data:`rollouts.registry.BACKENDS`); ``kwargs`` go to its constructor.

    ``hf``: HFBackend(model_path, tokenizer_path=None, device="cpu", dtype=None, max_batch_rows=64,
    prefix_reuse=True); ``vllm``: VLLMBackend(model, ..., engine="loop"); ``openai``:
    OpenAIBackend(base_url, model, api_key=None, max_concurrency=16, max_retries=5, timeout_s=120).
    """
    return backend_spec(name).load()(**kwargs)


__all__ = [
    "BACKENDS",
    "BackendSpec",
    "BackendStats",
    "Completion",
    "Counters",
    "GenRequest",
    "MissingDependency",
    "PromptFormat",
    "RolloutBackend",
    "SamplingConfig",
    "backend_spec",
    "make_backend",
    "make_prompt_format",
    "require",
]
