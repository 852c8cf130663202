"""Generation backends: K independent continuations per prompt (``hf``, ``vllm``, ``openai``).

``import rollouts`` is light: torch / transformers / vllm / httpx are imported only when a backend is built.
"""

from __future__ import annotations

from .base import (
    BackendStats,
    Completion,
    GenRequest,
    MissingDependency,
    RolloutBackend,
    SamplingConfig,
    require,
)
from .prompts import PromptFormat, make_prompt_format

BACKENDS = ("hf", "vllm", "openai")


def make_backend(name: str, **kwargs) -> RolloutBackend:
    """Build a backend by name; ``kwargs`` go to its constructor.

    ``hf``: HFBackend(model_path, tokenizer_path=None, device="cpu", dtype=None, max_batch_rows=64,
    prefix_reuse=True); ``vllm``: VLLMBackend(model, ..., async_engine=False); ``openai``:
    OpenAIBackend(base_url, model, api_key=None, max_concurrency=16, max_retries=5, timeout_s=120).
    """
    if name == "hf":
        from .hf import HFBackend

        return HFBackend(**kwargs)
    if name == "vllm":
        from .vllm_backend import VLLMBackend

        return VLLMBackend(**kwargs)
    if name == "openai":
        from .openai_backend import OpenAIBackend

        return OpenAIBackend(**kwargs)
    raise ValueError(f"Unknown rollout backend {name!r}; choose one of {', '.join(BACKENDS)}.")


__all__ = [
    "BACKENDS",
    "BackendStats",
    "Completion",
    "GenRequest",
    "MissingDependency",
    "PromptFormat",
    "RolloutBackend",
    "SamplingConfig",
    "make_backend",
    "make_prompt_format",
    "require",
]
