"""The one configuration of a labeling run: a tree of documented sub-configs, validated once.

:class:`LabelConfig` holds one section per concern: :class:`InputConfig` (what to read), :class:`OutputConfig`
(where to write), :class:`ModelConfig` (model, prompt, backend), one options class per backend (declared with
the backend in :mod:`rollouts.registry`), :class:`SamplingOptions`, :class:`StrategyConfig`,
:class:`GraderOptions` and :class:`ExecutorConfig`. Every field is declared with its documentation
(:func:`rollouts.registry.option`): ``mcprm label --help`` and README's option table are made from it, and
``--config run.yaml`` and the CLI both build the tree through :meth:`LabelConfig.from_dict`. Options keep
their flat names (``cfg.k``, ``LabelConfig(input=[...], k=4)``), each living in exactly one section.

:meth:`LabelConfig.identity` hashes the fields marked ``identity`` (model, prompt, K, strategy, sampling,
seed, grader): what a label *means*. Performance knobs (workers, shard size, batch sizes, Ray address) are
left out, so a re-run with more workers resumes the same corpus.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.config import DEFAULT_TIMEOUT_S
from pipeline.errors import FatalError
from pipeline.input.spec import ANSWER_EXTRACTORS, FORMATS, InputSpec
from pipeline.input.split import SPLIT_MODES
from rollouts.registry import BACKENDS as BACKEND_SPECS
from rollouts.registry import (
    VLLM_ENGINES,
    BackendSpec,
    HFOptions,
    ModelRef,
    OpenAIOptions,
    VLLMOptions,
    option,
)

DEFAULT_K = 20  # continuations per step prefix: the one default of k (SamplingOptions, StrategyParams); README "Labels" says why
# binary-search's probe point and relative drop (StrategyConfig, StrategyParams; BENCHMARKS.md, issue 16)
UNREADABLE_POLICIES = ("failure", "exclude")  # GraderOptions.unreadable (pipeline.labeling.last_step.outcome)
DEFAULT_BISECT_FRACTION = 0.6
DEFAULT_RELATIVE_DROP = 0.25
DEFAULT_WAVE_SIZE = 2  # continuations per wave (binary-search, adaptive, sequential; StrategyParams)
DEFAULT_TARGET_CONFIDENCE = 0.9  # sequential: the first error's posterior at which it stops (StrategyParams)
DEAD_PREFIX_RATE = 0.02  # eps: how often a dead prefix still reaches the gold answer by luck (rules, strategies)
DEFAULT_MAX_BATCH_REQUESTS = 512  # requests per generate() call (ExecutorConfig; the scheduler's default)
DEFAULT_SHARD_SIZE = 64  # solutions per shard (OutputConfig; pipeline.ray_data's batch size)

STRATEGIES = ("per-step", "binary-search", "adaptive", "sequential")
BACKENDS = tuple(BACKEND_SPECS)  # hf, vllm, openai (rollouts/registry.py)
EXECUTORS = ("auto", "ray", "local")
PROMPT_FORMATS = ("plain", "chat")

__all__ = ["BACKENDS", "DEFAULT_K", "EXECUTORS", "STRATEGIES", "VLLM_ENGINES", "ConfigError", "LabelConfig"]


class ConfigError(FatalError, ValueError):
    """A configuration value is wrong; the message says which option and what to do."""


def _at_least(problems: list[str], name: str, value, low) -> None:
    if value is not None and value < low:
        problems.append(f"--{name.replace('_', '-')} must be at least {low}, got {value}")


def _one_of(problems: list[str], name: str, value, allowed) -> None:
    if value not in allowed:
        problems.append(f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}, got {value!r}")


# ---------------------------------------------------------------------------------------------- sections
@dataclass
class InputConfig:
    """What to read and how (read by :mod:`pipeline.input`; the reader checks fields and files)."""

    input: list[str] = option(help="JSONL/Parquet file, folder or glob (any fsspec URL); repeatable.",
                              factory=list, flags=("--input", "-i"), shown="the bundled sample")
    problem_field: str = option("problem", "Input field holding the problem.")
    answer_field: str = option("answer", "Input field holding the gold answer.")
    steps_field: str = option("steps", "Input field holding the steps (a list of strings).")
    solution_field: str = option("solution", "Input field holding the solution as one text (cut by --splitter) "
                                             "when there is no steps field.")
    id_field: str = option("id", "Input field holding the row id (optional; default: a content hash).")
    splitter: str = option("blank-line", "How a solution text is cut into steps; gsm8k: lines, without <<...>> "
                                         "annotations and the #### answer line.", choices=SPLIT_MODES)
    split_regex: str | None = option(None, "--splitter regex: the separator regex between steps.")
    input_format: str | None = option(None, "Input file format.", choices=FORMATS, shown="by file extension")
    answer_extract: str | None = option(None, "Take the gold answer out of a worked answer field (gsm8k: after "
                                              "####; boxed: the last \\boxed{}).", choices=ANSWER_EXTRACTORS,
                                        shown="the field as it is")
    max_step_chars: int = option(20000, "Reject steps longer than this many characters.")
    max_steps: int = option(200, "Reject solutions with more steps.")
    skip_bad: bool = option(False, "Write bad rows (invalid, too long for the model) to rejects/ and label the "
                                   "rest.", shown="off: a bad row stops the run")
    limit: int | None = option(None, "Label only the first N valid solutions.", shown="all")

    def spec(self, **checks: Any) -> InputSpec:
        """What the reader needs (:class:`pipeline.input.InputSpec`): this section's fields of the same name, the
        paths and the format; ``checks``: its gold_check / prompt_check."""
        same = {f.name for f in dataclasses.fields(InputSpec)} & {f.name for f in dataclasses.fields(self)}
        return InputSpec(paths=tuple(self.input), format=self.input_format, **{n: getattr(self, n) for n in same},
                         **checks)

    def problems(self) -> list[str]:
        out: list[str] = []
        _at_least(out, "max_step_chars", self.max_step_chars, 1)
        _at_least(out, "max_steps", self.max_steps, 1)
        _at_least(out, "limit", self.limit, 0)
        return out


@dataclass
class OutputConfig:
    """Where the corpus goes and how it is cut into shards."""

    output: str = option("./mcprm-out", "Output corpus folder (any fsspec URL).", flags=("--output", "-o"))
    overwrite: bool = option(False, "Start a new corpus version with other settings on an existing output.")
    shard_size: int = option(DEFAULT_SHARD_SIZE, "Solutions per shard (the unit of work, resume and balance).")

    def problems(self) -> list[str]:
        out: list[str] = []
        _at_least(out, "shard_size", self.shard_size, 1)
        return out


@dataclass
class ModelConfig:
    """The model, the prompt it is given, and the backend that runs it."""

    model: str = option("", "Model folder or hub name; for --backend openai, the model name the server serves "
                            "(GET /v1/models).", identity=True, shown="the bundled model")
    tokenizer: str | None = option(None, "Tokenizer folder or name, if not the model's.", identity=True,
                                   shown="the model's")
    backend: str = option("hf", "Rollout engine: " + ", ".join(f"{s.name} ({s.summary})"
                                                                for s in BACKEND_SPECS.values()) + ".",
                          choices=BACKENDS)
    prompt_format: str = option("plain", "plain: a text template; chat: the model's chat template.",
                                identity=True, choices=PROMPT_FORMATS)
    prompt_template: str | None = option(None, "plain format template with {problem}.", identity=True,
                                         shown="'Problem: {problem}\\nSolution:\\n'")
    step_separator: str | None = option(None, "Text between steps.", identity=True,
                                        shown="plain: newline, chat: blank line")
    dtype: str | None = option(None, "Weights dtype (hf, vllm).", shown="the model's", cli=False,
                               identity="non-default")

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "backend", self.backend, BACKENDS)
        if self.prompt_format not in PROMPT_FORMATS:
            out.append(f"--prompt-format must be 'plain' or 'chat', got {self.prompt_format!r}")
        return out


@dataclass
class SamplingOptions:
    """How each continuation is sampled (every field changes what a label means)."""

    k: int = option(DEFAULT_K, "Continuations per step prefix.", identity=True, flags=("--k",))
    temperature: float = option(1.0, "Sampling temperature of the continuations.", identity=True)
    top_p: float = option(1.0, "Nucleus sampling top-p of the continuations.", identity=True)
    max_new_tokens: int = option(256, "Most tokens a continuation may generate (one that ends without an answer "
                                      "counts as incorrect).", identity=True)
    seed: int = option(0, "Run seed; every request's seed derives from it (same labels under any sharding).",
                       identity=True)
    ignore_eos: bool = option(False, "Benchmarks only: generate exactly max_new_tokens.", identity=True, cli=False)

    def problems(self) -> list[str]:
        out: list[str] = []
        _at_least(out, "k", self.k, 1)
        if self.temperature < 0:
            out.append(f"--temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            out.append(f"--top-p must be in (0, 1], got {self.top_p}")
        _at_least(out, "max_new_tokens", self.max_new_tokens, 1)
        return out


@dataclass
class StrategyConfig:
    """Which steps get rollouts, and how many (README: Labels)."""

    strategy: str = option("binary-search", "Labeling strategy (README: Labels).", identity=True, choices=STRATEGIES)
    wave_size: int = option(DEFAULT_WAVE_SIZE, "adaptive / binary-search: continuations per wave.",
                            identity=True, strategies=("binary-search", "adaptive", "sequential"))
    confidence_width: float | None = option(None, "adaptive: keep sampling a positive step until its 95% interval "
                                                  "is narrower than this.", identity=True,
                                            shown="off", strategies=("binary-search", "adaptive"))
    trust_correct: bool | None = option(None, "Label solutions with a correct final answer positive without "
                                              "rollouts.", identity=True,
                                        shown="on for binary-search/adaptive, off for per-step")
    early_stop: bool = option(True, "binary-search: stop a probe at its first success (off = K per probe, "
                                    "OmegaPRM's original).", identity=True,
                            strategies=("binary-search",))
    bisect_fraction: float = option(DEFAULT_BISECT_FRACTION, "binary-search: where the next probe goes between the last live and the "
                                         "first dead prefix (0.5 = the midpoint; larger = later prefixes first).",
                                    identity="non-default", legacy=0.5, strategies=("binary-search",))
    relative_drop: float = option(DEFAULT_RELATIVE_DROP, "binary-search: a prefix whose success rate is under this fraction "
                                               "of the last live prefix's is dead (a wrong step the model recovers "
                                               "from now and then); 0 = any success is alive.",
                                         identity="non-default", legacy=0.0, strategies=("binary-search",))
    reuse_rollouts: bool = option(True, "Count a continuation that writes the solution's next steps verbatim as a "
                                        "draw of those later prefixes too (no extra tokens; README: Labels).",
                                  identity="non-default", legacy=False)
    # issue 16 (sequential strategy; pipeline/labeling/strategies.py)
    target_confidence: float = option(DEFAULT_TARGET_CONFIDENCE, "sequential: stop when the first error's posterior probability "
                                           "reaches this.", identity="non-default",
                                      strategies=("sequential",))
    max_tokens_per_solution: int | None = option(None, "sequential: stop sampling a solution once its "
                                                       "continuations generated this many tokens.",
                                                 identity="non-default",
                                                 shown="off", strategies=("sequential",))

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "strategy", self.strategy, STRATEGIES)
        if not 0 < self.target_confidence < 1:
            out.append(f"--target-confidence must be in (0, 1), got {self.target_confidence}")
        _at_least(out, "max_tokens_per_solution", self.max_tokens_per_solution, 1)
        _at_least(out, "wave_size", self.wave_size, 1)
        if not 0 <= self.relative_drop < 1:
            out.append(f"--relative-drop must be in [0, 1), got {self.relative_drop}")
        if not 0 < self.bisect_fraction < 1:
            out.append(f"--bisect-fraction must be in (0, 1), got {self.bisect_fraction}")
        if self.confidence_width is not None and not 0 < self.confidence_width < 1:
            out.append(f"--confidence-width must be in (0, 1), got {self.confidence_width}")
        return out

    def effective_trust_correct(self) -> bool:
        return self.strategy != "per-step" if self.trust_correct is None else bool(self.trust_correct)


@dataclass
class GraderOptions:
    """How a continuation's final answer is compared with the gold answer (:mod:`graders`)."""

    grader: str = option("sympy", "Answer grader: sympy | exact | math-verify | a registered grader.",
                         identity=True)
    grader_timeout: float = option(DEFAULT_TIMEOUT_S, "Seconds one answer comparison may take (then ungradable).",
                                   identity=True)
    unreadable: str = option("failure", "A continuation whose answer the grader cannot read: failure (did not "
                                        "reach the gold answer, Math-Shepherd) or exclude (left out of the "
                                        "counts; schema 3's rule).", identity="non-default", legacy="exclude",
                        choices=UNREADABLE_POLICIES)

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "unreadable", self.unreadable, UNREADABLE_POLICIES)
        if not self.grader_timeout > 0:
            out.append(f"--grader-timeout must be > 0 seconds, got {self.grader_timeout}")
        from graders import get_grader

        try:
            get_grader(self.grader)
        except KeyError as e:
            out.append(f"--grader: {e.args[0]}")
        return out


@dataclass
class ExecutorConfig:
    """Where and how widely shards run (performance only: never part of the identity)."""

    executor: str = option("auto", "Where shards run: auto = local (in-process) on a small machine (< 4 CPUs, no "
                                   "GPU) unless --ray-address is given, else ray.", choices=EXECUTORS)
    ray_address: str | None = option(None, "Ray cluster address (or RAY_ADDRESS).", envvar="RAY_ADDRESS",
                                     shown="a local Ray")
    wait_for_resources: float = option(0.0, "ray: wait up to this many seconds for the GPUs/CPUs the workers need "
                                            "(autoscaling clusters) instead of failing at once.")
    num_workers: int | None = option(None, "Rollout actors (hf: CPU actors; vllm: one per GPU).",
                                     shown="one per GPU (vllm) or CPU slot (hf), at most one per shard")
    cpus_per_worker: float | None = option(None, "CPUs per worker (hf: torch threads; every backend: grader "
                                                 "processes).",
                                           shown="hf/openai: 1; vllm: the node's CPUs per GPU, at most 8")
    gpus_per_worker: float = option(0.0, "GPUs per worker.", shown="vllm: --tensor-parallel-size; hf: 0")
    max_batch_requests: int = option(DEFAULT_MAX_BATCH_REQUESTS, "Requests handed to the backend per generate() call.", cli=False)
    progress: bool = option(True, "Live progress (the CLI: --progress / --quiet).", cli=False)
    ray_logs: bool = option(False, "Show Ray's own log lines (workers' output) in the terminal (the CLI: -v).",
                            cli=False)

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "executor", self.executor, EXECUTORS)
        _at_least(out, "num_workers", self.num_workers, 1)
        if self.wait_for_resources < 0:
            out.append(f"--wait-for-resources must be >= 0 seconds, got {self.wait_for_resources}")
        if (self.cpus_per_worker is not None and self.cpus_per_worker <= 0) or self.gpus_per_worker < 0:
            out.append(f"--cpus-per-worker must be > 0 and --gpus-per-worker >= 0, got {self.cpus_per_worker} "
                       f"and {self.gpus_per_worker}")
        _at_least(out, "max_batch_requests", self.max_batch_requests, 1)
        return out


# The tree: section attribute -> its class, in the order of `mcprm label --help`. Sections are named for what they
# decide (the options' own names -- input, output, model, strategy, grader, executor -- are taken by options); a
# backend's options section is named after the backend (cfg.vllm.vllm_engine). Every option has one flat name
# across the tree (cfg.vllm_engine).
SECTIONS: dict[str, type] = {
    "reading": InputConfig,
    "writing": OutputConfig,
    "prompting": ModelConfig,
    **{name: spec.options for name, spec in BACKEND_SPECS.items()},
    "sampling": SamplingOptions,
    "labeling": StrategyConfig,
    "grading": GraderOptions,
    "execution": ExecutorConfig,
}
assert (HFOptions, VLLMOptions, OpenAIOptions) == tuple(s.options for s in BACKEND_SPECS.values())


@functools.cache
def _fields() -> dict[str, tuple[str, dataclasses.Field, Any]]:
    """Flat name -> (section, field, resolved type)."""
    out: dict[str, tuple[str, dataclasses.Field, Any]] = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            assert f.name not in out and f.name not in SECTIONS, f"option {f.name} declared twice"
            out[f.name] = (section, f, hints[f.name])
    return out


def option_fields() -> dict[str, tuple[dataclasses.Field, Any]]:
    """Every option of ``mcprm label`` in help order: flat name -> (its field with its docs, its type)."""
    return {name: (f, t) for name, (_, f, t) in _fields().items()}


def option_default(name: str) -> Any:
    f = _fields()[name][1]
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def identity_fields() -> tuple[str, ...]:
    """The options that change the meaning of labels (marked ``identity`` where they are declared)."""
    return tuple(n for n, (_, f, _t) in _fields().items() if f.metadata.get("identity") in (True, "non-default"))


IDENTITY_FIELDS = identity_fields()
_LEFT_OUT = object()  # an option that adds nothing to a configuration's identity


class LabelConfig:
    """Every option of a run, as a tree of sections (see the module docstring), validated at construction.

    ``LabelConfig(input=[...], k=4, backend="vllm")`` takes the options by their flat names (and/or whole
    sections: ``sampling=SamplingOptions(k=4)``); ``cfg.k`` reads and ``cfg.k = 4`` sets an option in its
    section. A wrong value raises :class:`ConfigError` naming the option."""

    reading: InputConfig
    writing: OutputConfig
    prompting: ModelConfig
    hf: HFOptions
    vllm: VLLMOptions
    openai: OpenAIOptions
    sampling: SamplingOptions
    labeling: StrategyConfig
    grading: GraderOptions
    execution: ExecutorConfig

    def __init__(self, **options: Any):
        by_section: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        fields = _fields()
        given_sections: dict[str, Any] = {}
        for key, value in options.items():
            if key in SECTIONS:
                given_sections[key] = value
            elif key in fields:
                by_section[fields[key][0]][key] = value
            else:
                raise TypeError(f"LabelConfig got an unknown option {key!r}")
        for section, cls in SECTIONS.items():
            base = given_sections.get(section)
            if base is not None and not isinstance(base, cls):
                raise TypeError(f"LabelConfig: {section} must be a {cls.__name__}, got {type(base).__name__}")
            # a copy: sections are never shared between two configs (cfg.k = ... changes one config only)
            value = dataclasses.replace(base, **by_section[section]) if base is not None else cls(**by_section[section])
            object.__setattr__(self, section, value)
        self._validate()

    # -------------------------------------------------------------- flat names
    def __getattr__(self, name: str) -> Any:  # only called when normal lookup fails: the options
        entry = _fields().get(name)
        if entry is None:
            raise AttributeError(f"LabelConfig has no option {name!r}")
        return getattr(object.__getattribute__(self, entry[0]), name)

    def __setattr__(self, name: str, value: Any) -> None:
        entry = _fields().get(name)
        if entry is not None:
            setattr(getattr(self, entry[0]), name, value)
        elif name in SECTIONS:
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"LabelConfig has no option {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelConfig) and all(getattr(self, s) == getattr(other, s) for s in SECTIONS)

    def __repr__(self) -> str:
        return "LabelConfig(" + ", ".join(f"{s}={getattr(self, s)!r}" for s in SECTIONS) + ")"

    def replace(self, **options: Any) -> LabelConfig:
        """A copy with some options changed (validated, as every config is)."""
        return LabelConfig(**{s: getattr(self, s) for s in SECTIONS}, **options)

    # -------------------------------------------------------------- validation (once, at construction)
    def _validate(self) -> None:
        problems: list[str] = []
        for section in SECTIONS:
            sec = getattr(self, section)
            problems += sec.problems(section == self.prompting.backend) if section in BACKEND_SPECS else sec.problems()
        if problems:
            raise ConfigError(problems[0] if len(problems) == 1 else "; ".join(problems))

    def validate(self) -> LabelConfig:
        """Check again after options were set one by one (``cfg.k = 0``); construction already checked."""
        self._validate()
        return self

    # -------------------------------------------------------------- derived views
    @property
    def backend_spec(self) -> BackendSpec:
        """The chosen backend's description (rollouts/registry.py)."""
        return BACKEND_SPECS[self.prompting.backend]

    @property
    def backend_options(self) -> Any:
        """The chosen backend's options section (``cfg.vllm`` for ``--backend vllm``)."""
        return getattr(self, self.prompting.backend)

    @property
    def worker_gpus(self) -> float:
        """GPUs one worker holds: ``--gpus-per-worker`` if given, else what its backend needs (vllm: the
        tensor-parallel size; hf, openai: 0)."""
        return self.execution.gpus_per_worker or self.backend_spec.gpus(self.backend_options)

    def worker_cpus(self, cpus_per_gpu: float | None = None) -> float:
        """CPUs one worker takes: ``--cpus-per-worker`` if given; else 1 for a CPU/remote backend, and for a GPU
        backend the node's CPUs per GPU (``cpus_per_gpu``, what the executor sees) times its GPUs, at most 8,
        less one left to the driver and Ray (a GPU worker grades its continuations on them)."""
        if self.execution.cpus_per_worker is not None:
            return float(self.execution.cpus_per_worker)
        gpus = self.worker_gpus
        if gpus <= 0 or not cpus_per_gpu:
            return 1.0
        return float(max(1, min(8, int(cpus_per_gpu * gpus) - 1)))

    def model_ref(self) -> ModelRef:
        return ModelRef(model=self.prompting.model, tokenizer=self.prompting.tokenizer, dtype=self.prompting.dtype,
                        seed=self.sampling.seed)

    def resolved(self) -> LabelConfig:
        """Fill in defaults that depend on the machine (bundled model and sample)."""
        from pipeline import bundled

        return self.replace(model=self.model or str(bundled.model_dir()),
                            input=list(self.input) or [str(bundled.sample_path())],
                            trust_correct=self.labeling.effective_trust_correct())

    def effective_trust_correct(self) -> bool:
        return self.labeling.effective_trust_correct()

    # -------------------------------------------------------------- identity
    def identity_dict(self) -> dict[str, Any]:
        """The identity fields of every section (flat names), the model's fingerprint and the grader version."""
        d = {}
        for name in identity_fields():
            value = self._identity_value(name)
            if value is not _LEFT_OUT:
                d[name] = value
        d["trust_correct"] = self.effective_trust_correct()
        d["model"] = model_fingerprint(self.model)
        if self.tokenizer:
            d["tokenizer"] = model_fingerprint(self.tokenizer)
        from graders import get_grader, grader_identity

        d["grader_version"] = grader_identity(get_grader(self.grader), self.grader_config())
        return d

    def grader_config(self, workers: int = 0):
        """The :class:`graders.GraderConfig` this run grades with (``workers``: grader processes, a resource that
        is no part of the identity; its policy options are)."""
        from graders import GraderConfig

        return GraderConfig(timeout_s=self.grader_timeout, workers=workers)

    def _identity_value(self, name: str) -> Any:
        """What option ``name`` contributes to the identity (``_LEFT_OUT``: nothing).

        ``identity=True``: its value. ``identity="non-default"`` (options added after corpora were written): its
        value only when set to other than its default (or ``legacy``), so every earlier corpus keeps its
        identity. ``strategies=(...)``: a strategy outside them ignores the option, so its setting never
        refuses a refresh; an ``identity=True`` option scoped after corpora were written (wave_size,
        early_stop, confidence_width) is then recorded at its default, as those corpora hashed it."""
        md = _fields()[name][1].metadata
        mode = md.get("identity")
        if md.get("strategies") and self.strategy not in md["strategies"]:  # an option this strategy ignores
            return option_default(name) if mode is True else _LEFT_OUT
        if mode == "non-default" and getattr(self, name) == md.get("legacy", option_default(name)):
            return _LEFT_OUT
        return getattr(self, name) if mode in (True, "non-default") else _LEFT_OUT

    def identity(self) -> str:
        blob = json.dumps(self.identity_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Every option by its flat name (the manifest's ``config``), without secrets."""
        return {name: _plain(getattr(self, name)) for name, (_, f, _t) in _fields().items()
                if not f.metadata.get("secret")}  # never write secrets (api_key) into manifests

    # -------------------------------------------------------------- building from files and options
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
        """The tree from a mapping of option names (a run file, the CLI's options); ``overrides`` win."""
        names = _fields()
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


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


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
