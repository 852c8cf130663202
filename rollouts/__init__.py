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
    "make_prompt_format",
    "require",
]
