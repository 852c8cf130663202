"""The one interface every generation backend implements.

A backend turns prompts into independent samples. It knows nothing of steps, labels or graders:
``generate`` gets a batch of :class:`GenRequest` (a prompt, how many independent samples ``n``, and a
per-request ``seed``) and returns, for every request, exactly ``n`` :class:`Completion` objects.

Independent means separate samples of the model's distribution (``n=K`` in vLLM / OpenAI terms), never
"write K solutions" inside one prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

VLLM_ENGINES = ("loop", "async", "offline")  # the vllm backend's engines (rollouts/vllm_backend.py)
DEFAULT_VLLM_ENGINE = "loop"  # streaming; measured the fastest (BENCHMARKS.md)
# vLLM engines sharing one GPU; 0: the count sized from the model and the GPU (rollouts/engine_sizing.py,
# auto_engines_per_gpu: two for a small model on a big GPU, else one). One engine's host side caps it (on one H200
# at 1.5B its engine core used a whole CPU core and the GPU was busy a third of the time); `mcprm label` with two
# gave 1.14-1.17x one's tokens/s on the same 1,500 solutions (BENCHMARKS.md, "Engine levers on one H200")
DEFAULT_ENGINES_PER_GPU = 0
DEFAULT_MAX_MODEL_LEN = 4096  # the vllm backend's context when --max-model-len is not given


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling settings shared by every request of a run (part of the run's identity)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    # Generation stops at the model's EOS token or at the first of these strings (not included in the text).
    stop: tuple[str, ...] = ()
    # Extra token ids that end a continuation (like EOS), and whether to ignore EOS (benchmarks only).
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False


@dataclass(frozen=True)
class GenRequest:
    """``n`` independent continuations of ``prompt``.

    ``seed`` makes the samples reproducible; backends derive the i-th sample's randomness from it so that
    the same request gives the same samples whatever else is in the batch (where the engine allows). What a
    sample is depends on the whole request, not on the seed alone: vLLM (and sglang, the same way) samples
    sample i with seed ``seed + i``; hf draws ``n`` uniforms per decode step from one generator seeded with
    ``seed``, so sample i depends on ``n`` as well. Two requests give the same samples only if their prompt,
    ``seed`` and ``n`` are the same: the scheduler sends each wave of a probe as its own request with the seed
    the plain schedule gives it, whether the wave is drawn ahead or not (pipeline.labeling.ahead).
    ``group`` names requests that share a prefix (the requests of one solution): backends keep them
    together so that the prefix is encoded once (HF KV-cache reuse, vLLM prefix caching).
    """

    prompt: str
    n: int
    seed: int
    group: str = ""


@dataclass(frozen=True)
class Completion:
    text: str
    num_tokens: int  # generated tokens (not counting the prompt)
    finish_reason: str = "stop"  # "stop" (EOS or stop string) | "length" (hit max_new_tokens)
    # the generated token ids, where the backend returns them (hf, vllm; None: an OpenAI-compatible server).
    # Rollout reuse needs them: a continuation is a draw of a later prefix only if its tokens are that prompt's.
    token_ids: tuple[int, ...] | None = None


@dataclass
class Counters:
    """The one counters type: what a backend counts over its lifetime, and what a scheduler counts over the
    solutions it labels (one shard). Each reader takes its own view: :meth:`as_dict` (a backend's, in the
    manifest's ``worker_stats``) and :meth:`shard_dict` (a shard's, in the worker's result)."""

    requests: int = 0  # requests generated (backend) / sent (scheduler)
    rounds: int = 0  # scheduler rounds
    rollouts: int = 0  # completions (a backend's "samples")
    rollout_tokens: int = 0  # tokens generated (a backend's "generated_tokens")
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens served from a (prefix / KV) cache
    ungradable: int = 0  # verdicts with correct None (an answer the grader could not decide)
    no_answer: int = 0  # continuations with no final answer (graded incorrect)
    unreadable: int = 0  # continuations whose answer the grader could not read (a failure by default)
    reused_rollouts: int = 0  # scheduler: continuations also credited to a later prefix (rollout reuse), no tokens
    drawn_ahead_dropped: int = 0  # scheduler: continuations drawn ahead and dropped (Scheduler.tail_fill): tokens, no draw
    generate_seconds: float = 0.0
    grade_seconds: float = 0.0
    per_round_requests: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # a backend's own figures (prefix-cache hit rate, throughput)

    # A backend's names for the same counts.
    samples = property(lambda self: self.rollouts, lambda self, v: setattr(self, "rollouts", v))
    generated_tokens = property(lambda self: self.rollout_tokens, lambda self, v: setattr(self, "rollout_tokens", v))

    def as_dict(self) -> dict:
        """A backend's counters (reported in the manifest)."""
        d = {
            "requests": self.requests,
            "samples": self.rollouts,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.rollout_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "generate_seconds": round(self.generate_seconds, 3),
        }
        d.update(self.extra)
        return d

    def shard_dict(self) -> dict:
        """A shard's counters (in the worker's result for the shard)."""
        return {k: getattr(self, k) for k in _SHARD_KEYS}


# A backend's samples of its engine's own load (rollouts.vllm_backend.add_engine_sample) that add up over time, so
# a warm worker's share of one run is what they grew by (pipeline.execution.fleet)
ENGINE_SAMPLE_KEYS = ("engine_samples", "engine_running_sum", "engine_waiting_sum", "engine_steps",
                      "engine_step_tokens")

_SHARD_KEYS = ("rollouts", "rollout_tokens", "reused_rollouts", "drawn_ahead_dropped", "ungradable", "no_answer", "unreadable", "rounds", "generate_seconds", "grade_seconds")
BackendStats = Counters  # the name backends and their tests have used


@runtime_checkable
class RolloutBackend(Protocol):
    name: str
    stats: Counters

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """Return ``len(requests)`` lists; list i holds exactly ``requests[i].n`` completions."""
        ...

    def close(self) -> None: ...


class MissingDependency(ImportError):
    """Raised when an optional heavy dependency (torch, vllm, ray, httpx) is not installed."""


def require(module: str, hint: str):
    """Import ``module`` lazily, or raise :class:`MissingDependency` with an install hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingDependency(f"{module} is not installed ({e}). Install it with: {hint}") from e


def order_by_group(requests: Sequence[GenRequest]) -> list[int]:
    """Indices with each group's requests adjacent, groups in order of first appearance (stable): a GPU engine's
    prefix cache then computes a group's shared prefix once (the vllm and sglang backends)."""
    first: dict[str, int] = {}
    for i, r in enumerate(requests):
        first.setdefault(r.group, i)
    return sorted(range(len(requests)), key=lambda i: (first[requests[i].group], i))
