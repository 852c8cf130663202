"""The one configuration object of a labeling run.

Every option of ``mcprm label`` is a field here; the CLI and ``--config run.yaml`` only fill it in.
:meth:`LabelConfig.identity` hashes the fields that change what a label *means* (model, prompt, K,
strategy, sampling, seed, grader); performance knobs (workers, shard size, batch sizes, Ray address) are
left out, so a re-run with more workers resumes the same corpus.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import FatalError
from rollouts.vllm_backend import ENGINES

DEFAULT_K = 8  # continuations per step prefix: the one default of k (LabelConfig, StrategyParams)

STRATEGIES = ("per-step", "binary-search", "adaptive")

BACKENDS = ("hf", "vllm", "openai")
VLLM_ENGINES = ENGINES  # the vllm backend's engines (rollouts/vllm_backend.py; it imports no vllm at load)
EXECUTORS = ("auto", "ray", "local")

# Fields that change the meaning of labels. Anything else is a performance or I/O knob.
IDENTITY_FIELDS = (
    "model",
    "tokenizer",
    "prompt_format",
    "prompt_template",
    "step_separator",
    "strategy",
    "k",
    "temperature",
    "top_p",
    "max_new_tokens",
    "seed",
    "grader",
    "grader_timeout",
    "wave_size",
    "confidence_width",
    "trust_correct",
    "early_stop",
    "load_format",
    "ignore_eos",
)


class ConfigError(FatalError, ValueError):
    """A configuration value is wrong; the message says which option and what to do."""


@dataclass
class LabelConfig:
    # input
    input: list[str] = field(default_factory=list)  # empty = the bundled sample
    problem_field: str = "problem"
    answer_field: str = "answer"
    steps_field: str = "steps"
    solution_field: str = "solution"
    id_field: str = "id"
    splitter: str = "blank-line"
    split_regex: str | None = None
    input_format: str | None = None  # jsonl | json | parquet (default: by file extension)
    answer_extract: str | None = None  # gsm8k | boxed: take the gold answer out of a worked answer field
    max_step_chars: int = 20000
    max_steps: int = 200
    skip_bad: bool = False
    limit: int | None = None  # label only the first N valid solutions
    # output
    output: str = "./mcprm-out"
    overwrite: bool = False
    shard_size: int = 64
    # model and prompt
    model: str = ""  # empty = the bundled model
    tokenizer: str | None = None
    backend: str = "hf"
    base_url: str | None = None  # openai backend
    api_key: str | None = None
    prompt_format: str = "plain"  # "plain" | "chat"
    prompt_template: str | None = None  # plain: "Problem: {problem}\nSolution:\n"
    step_separator: str | None = None  # plain: "\n", chat: "\n\n"
    device: str = "cpu"
    dtype: str | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    max_model_len: int | None = None
    load_format: str = "auto"  # vllm: "dummy" = random weights (benchmarks)
    vllm_engine: str = "loop"  # vllm: "loop" (streaming, default), "async" (vLLM's AsyncLLM), "offline" (rounds)
    # sampling
    k: int = DEFAULT_K
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    ignore_eos: bool = False  # benchmarks only: generate exactly max_new_tokens
    # strategy
    strategy: str = "per-step"
    wave_size: int = 2  # adaptive: continuations per wave
    confidence_width: float | None = None  # adaptive: stop a step when its 95% interval is narrower
    trust_correct: bool | None = None  # None = strategy default (off for per-step, on for the others)
    early_stop: bool = True  # binary-search: a probe stops at its first success (same alive/dead decision)
    # grader
    grader: str = "sympy"
    grader_timeout: float = 2.0
    # execution
    executor: str = "auto"  # auto: local on a small machine (< 4 CPUs, no GPU) unless --ray-address; else ray
    ray_address: str | None = None
    wait_for_resources: float = 0.0  # ray: seconds to wait for GPUs/CPUs to appear (autoscaling) before failing
    num_workers: int | None = None  # None: one per GPU (vllm) or per CPU slot (hf), at most one per shard
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_batch_requests: int = 512  # requests handed to the backend per generate() call
    progress: bool = True
    ray_logs: bool = False  # show Ray's own log lines (workers' output) in the terminal (mcprm label -v)

    # ----------------------------------------------------------------------------------------------
    def validate(self) -> LabelConfig:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.vllm_engine not in VLLM_ENGINES:
            raise ConfigError(f"--vllm-engine must be one of {', '.join(VLLM_ENGINES)}, got {self.vllm_engine!r}")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.k < 1:
            raise ConfigError(f"--k must be at least 1, got {self.k}")
        if self.temperature < 0:
            raise ConfigError(f"--temperature must be >= 0, got {self.temperature}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.shard_size < 1:
            raise ConfigError(f"--shard-size must be at least 1, got {self.shard_size}")
        if self.num_workers is not None and self.num_workers < 1:
            raise ConfigError(f"--num-workers must be at least 1, got {self.num_workers}")
        if self.wave_size < 1:
            raise ConfigError(f"--wave-size must be at least 1, got {self.wave_size}")
        if self.confidence_width is not None and not 0 < self.confidence_width < 1:
            raise ConfigError(f"--confidence-width must be in (0, 1), got {self.confidence_width}")
        if self.wait_for_resources < 0:
            raise ConfigError(f"--wait-for-resources must be >= 0 seconds, got {self.wait_for_resources}")
        if self.backend == "openai" and not self.base_url:
            raise ConfigError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        if self.prompt_format not in ("plain", "chat"):
            raise ConfigError(f"--prompt-format must be 'plain' or 'chat', got {self.prompt_format!r}")
        return self

    def resolved(self) -> LabelConfig:
        """Fill in defaults that depend on the machine (bundled model and sample) and validate."""
        from pipeline import bundled

        c = dataclasses.replace(self).validate()
        if not c.model:
            c.model = str(bundled.model_dir())
        if not c.input:
            c.input = [str(bundled.sample_path())]
        if c.trust_correct is None:
            c.trust_correct = c.strategy != "per-step"
        return c.validate()

    def effective_trust_correct(self) -> bool:
        return self.strategy != "per-step" if self.trust_correct is None else bool(self.trust_correct)

    def identity_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in IDENTITY_FIELDS}
        d["trust_correct"] = self.effective_trust_correct()
        d["model"] = model_fingerprint(self.model)
        if self.tokenizer:
            d["tokenizer"] = model_fingerprint(self.tokenizer)
        from graders import get_grader

        d["grader_version"] = get_grader(self.grader).version
        return d

    def identity(self) -> str:
        blob = json.dumps(self.identity_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("api_key", None)  # never write secrets into manifests
        return d

    @classmethod
    def from_file(cls, path: str, **overrides: Any) -> LabelConfig:
        """Read a YAML or JSON run file; keys are option names with ``-`` or ``_``."""
        import yaml

        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file {path} does not exist")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML/JSON: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping of option: value")
        return cls.from_dict(data, source=path, **overrides)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config", **overrides: Any) -> LabelConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = str(key).replace("-", "_")
            if name not in names:
                raise ConfigError(f"{source}: unknown option {key!r}. Known options: {', '.join(sorted(names))}")
            kwargs[name] = value
        kwargs.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(kwargs.get("input"), str):
            kwargs["input"] = [kwargs["input"]]
        return cls(**kwargs)


def model_fingerprint(model: str) -> str:
    """A model's identity for the manifest: its name plus a hash of a local folder's config and weight sizes.

    Hashing multi-GB weights would be slow; config + file names/sizes catch a different checkpoint in the
    same folder in practice. Hub names are kept as they are (pin a revision to be exact).
    """
    p = Path(model)
    if not p.is_dir():
        return model
    h = hashlib.sha256()
    for f in sorted(p.iterdir()):
        if f.is_file() and (f.suffix in (".json", ".safetensors", ".bin", ".model") or f.name == "tokenizer.json"):
            h.update(f.name.encode())
            if f.suffix == ".json" and f.stat().st_size < 5_000_000:
                h.update(f.read_bytes())
            else:
                h.update(str(f.stat().st_size).encode())
    return f"{p.name}@{h.hexdigest()[:12]}"
