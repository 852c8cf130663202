"""The one configuration of a labeling run: a tree of documented sub-configs, validated once.

:class:`LabelConfig` holds one section per concern (declared in :mod:`pipeline.options`, with the defaults):
:class:`ReadingOptions` (what to read), :class:`WritingOptions` (where to write), :class:`PromptingOptions` (model,
prompt, backend), one options class per backend (declared with the backend in :mod:`rollouts.options`),
:class:`SamplingOptions`, :class:`LabelingOptions`, :class:`GradingOptions` and :class:`ExecutionOptions`. A
section's one name is its class's (:func:`section_name`: ``SamplingOptions`` is ``cfg.sampling``, the help panel
and the docs heading "Sampling"). Every field is declared with its documentation
(:func:`rollouts.options.option`): ``mcprm label --help`` and docs/options.md's option table are made from it, and
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.options import (
    ConfigError,
    ExecutionOptions,
    GradingOptions,
    LabelingOptions,
    PromptingOptions,
    ReadingOptions,
    SamplingOptions,
    WritingOptions,
)
from rollouts.options import HFOptions, OpenAIOptions, VLLMOptions, field_default
from rollouts.registry import BACKENDS as BACKEND_SPECS
from rollouts.registry import TAIL_FILL_CAPACITY, TAIL_FILL_FALLBACK, BackendSpec, ModelRef, engines_per_gpu

if TYPE_CHECKING:
    from rollouts.base import SamplingConfig
    from rollouts.prompts import PromptFormat


def section_name(cls: type) -> str:
    """A section's one name, its class's: ``SamplingOptions`` is the section ``sampling`` (``cfg.sampling``),
    ``VLLMOptions`` the section ``vllm``."""
    return cls.__name__.removesuffix("Options").lower()


def section_title(name: str) -> str:
    """The section's ``--help`` panel and docs/options.md heading: its name, with the backends that read it for
    a backend's section ("vllm / sglang backends")."""
    users = [b for b, spec in BACKEND_SPECS.items() if (spec.section or b) == name]
    if not users:
        return name.capitalize()
    return " / ".join(users) + (" backends" if len(users) > 1 else " backend")


# The tree, in the order of `mcprm label --help`: each section named after its class (section_name). Sections are
# named for what they decide (the options' own names -- input, output, model, strategy, grader, executor -- are
# taken by options); a backend's options section is named after the backend (cfg.vllm.vllm_engine). Every option
# has one flat name across the tree (cfg.vllm_engine).
SECTIONS: dict[str, type] = {section_name(cls): cls for cls in (
    ReadingOptions, WritingOptions, PromptingOptions,
    *(spec.options for spec in BACKEND_SPECS.values() if not spec.section),  # sglang: the vllm section
    SamplingOptions, LabelingOptions, GradingOptions, ExecutionOptions)}
# a backend's section is named after the backend whose options it is (LabelConfig.backend_options reads it so)
assert all(section_name(s.options) == (s.section or s.name) for s in BACKEND_SPECS.values())


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


def section_of(name: str) -> str:
    """The section option ``name`` lives in (``k``: ``sampling``)."""
    return _fields()[name][0]


def option_default(name: str) -> Any:
    return field_default(_fields()[name][1])


def identity_fields() -> tuple[str, ...]:
    """The options that change the meaning of labels (marked ``identity`` where they are declared)."""
    return tuple(n for n, (_, f, _t) in _fields().items() if f.metadata.get("identity") in (True, "non-default"))


IDENTITY_FIELDS = identity_fields()
_LEFT_OUT = object()  # an option that adds nothing to a configuration's identity


# CPUs (hf on CPU: torch threads; every backend: grader processes) of one worker of a CPU or remote backend
# when --cpus-per-worker is not given: the one place that default is declared (LabelConfig.worker_cpus). A machine's
# cores are used by workers, one per CPU (Ray: ``planned_workers``, ``ray_cluster.worker_shape``), never by threads:
# workers x threads stays at most the CPUs. Measured with the bundled 1 M-parameter model on a 2-core machine
# shared with other work: 2 torch threads ran a 64 x 200-token forward pass at 0.61-0.65/s against 1.38-1.68/s
# for 1 thread, and a one-token decode step at 4/s against 100-160/s (each thread waits for the other at every
# operation while the other is preempted); with OMP_WAIT_POLICY=PASSIVE 2 threads were still no faster (1.48 vs
# 1.51/s, 125 vs 223/s). The same machine labeled the default run (300 solutions) in 316 s and 315 s wall with one
# in-process worker (load 0.8-2.6), and in 272 s and 495 s wall with two single-thread Ray workers (`--executor
# ray`; load 2-4.7, then 2.6-6 with other test suites running), all with the same 9,316 rollouts and 633,092
# tokens: two workers help only when the other load leaves them the second core, so the small-machine default
# stays one in-process worker (executors.SMALL_MACHINE_CPUS) and its reason line offers Ray.
CPU_WORKER_THREADS = 1


def cpu_torch_threads() -> int:
    """Torch threads of every command that runs a model on this machine's CPU (``train``, ``score``,
    ``generate``; a ``label`` worker's are its ``--cpus-per-worker``, whose default is the same
    :data:`CPU_WORKER_THREADS`): one, for the measurements above (torch's own default, a thread per core, ran an
    epoch of ``mcprm train`` on the bundled model in 80 s against 12 s at one thread on a shared 2-core machine),
    unless ``OMP_NUM_THREADS`` is set: then the user's number (a quiet many-core machine may want more)."""
    import os

    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        n = 0
    return n if n >= 1 else CPU_WORKER_THREADS


def pin_cpu_threads() -> int:
    """Set torch's threads to :func:`cpu_torch_threads` (torch imported here: only a command that runs a model
    on the CPU calls this) and return them."""
    import torch

    n = cpu_torch_threads()
    torch.set_num_threads(n)
    return n


class LabelConfig:
    """Every option of a run, as a tree of sections (see the module docstring), validated at construction.

    ``LabelConfig(input=[...], k=4, backend="vllm")`` takes the options by their flat names (and/or whole
    sections: ``sampling=SamplingOptions(k=4)``); ``cfg.k`` reads and ``cfg.k = 4`` sets an option in its
    section. A wrong value raises :class:`ConfigError` naming the option."""

    reading: ReadingOptions
    writing: WritingOptions
    prompting: PromptingOptions
    hf: HFOptions
    vllm: VLLMOptions
    openai: OpenAIOptions
    sampling: SamplingOptions
    labeling: LabelingOptions
    grading: GradingOptions
    execution: ExecutionOptions

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
        """The chosen backend's options section (``cfg.vllm`` for ``--backend vllm`` and ``sglang``)."""
        return getattr(self, self.backend_spec.section or self.prompting.backend)

    @property
    def worker_shards(self) -> int:
        """Shards one worker labels at once: ``--shards-per-worker`` if given, else its backend's."""
        return self.execution.shards_per_worker or self.backend_spec.shards_per_worker

    @property
    def worker_shards_most(self) -> int:
        """Shards one worker may label at once (its actor's concurrency): ``--shards-per-worker`` if given (fixed),
        else its backend's most (the executor raises a worker's count up to it while its engines are starved:
        :func:`pipeline.execution.demand.shards_for_demand`)."""
        return self.execution.shards_per_worker or max(self.backend_spec.shards_per_worker,
                                                       self.backend_spec.most_shards_per_worker)

    def worker_tail_fill(self, capacity: int | None = None) -> int:
        """Continuations in flight under which probes draw ahead: ``--tail-fill`` if given, else its backend's
        (vllm: ``capacity``, the sequences the worker's engines run at once, where the backend states it)."""
        t = self.execution.tail_fill
        if t is not None:
            return t
        t = self.backend_spec.tail_fill
        if t == TAIL_FILL_CAPACITY:
            return int(capacity) if capacity else TAIL_FILL_FALLBACK
        return t

    @property
    def worker_gpus(self) -> float:
        """GPUs one worker holds: ``--gpus-per-worker`` if given, else what its backend needs (vllm: the
        tensor-parallel size; hf, openai: 0)."""
        return self.execution.gpus_per_worker or self.backend_spec.gpus(self.backend_options)

    def worker_cpus(self, cpus_per_gpu: float | None = None) -> float:
        """CPUs one worker takes: ``--cpus-per-worker`` if given; else :data:`CPU_WORKER_THREADS` (1) for a
        CPU/remote backend (a machine's cores are used by workers, one per CPU, not by threads), and for a GPU
        backend the node's CPUs per GPU (``cpus_per_gpu``, what the executor sees) times its GPUs, at most 8,
        less one left to the driver and Ray (a GPU worker grades its continuations on them)."""
        if self.execution.cpus_per_worker is not None:
            return float(self.execution.cpus_per_worker)
        gpus = self.worker_gpus
        if gpus <= 0 or not cpus_per_gpu:
            return float(CPU_WORKER_THREADS)
        return float(max(1, min(8, int(cpus_per_gpu * gpus) - 1)))

    # -------------------------------------------------------------- the settings of the stages outside pipeline/
    # Each built from its sections when a stage is made (the labeling worker, once per run), never copied field
    # by field elsewhere: the backend's ModelRef, the prompt format, the sampling, the grader's GraderConfig.
    def model_ref(self) -> ModelRef:
        return ModelRef(model=self.prompting.model, tokenizer=self.prompting.tokenizer, dtype=self.prompting.dtype,
                        seed=self.sampling.seed)

    def prompt_builder(self) -> PromptFormat:
        """The run's prompt format (``--prompt-format``, its template and step separator; a chat format reads
        the tokenizer's template)."""
        from rollouts.prompts import make_prompt_format

        p = self.prompting
        return make_prompt_format(p.prompt_format, (p.tokenizer or p.model) if p.prompt_format == "chat" else None,
                                  template=p.prompt_template, separator=p.step_separator)

    def sampling_config(self, prompt: PromptFormat | None = None) -> SamplingConfig:
        """How continuations are sampled, stopping where ``prompt``'s format says a step ends."""
        from rollouts.base import SamplingConfig

        s = self.sampling
        return SamplingConfig(temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens,
                              stop=prompt.stop if prompt is not None else (), ignore_eos=s.ignore_eos)

    def resolved(self) -> LabelConfig:
        """Fill in defaults that depend on the machine (bundled model and sample)."""
        from pipeline import bundled

        model = self.model or str(bundled.model_dir())
        machine: dict[str, Any] = {}
        if self.prompting.backend == "vllm" and self.vllm.engines_per_gpu == 0:
            # sized here, once, from the driver's GPU: the workers' placement (1/N of a GPU each) follows it
            machine["engines_per_gpu"] = engines_per_gpu(self.vllm, model, self.prompting.dtype)
        return self.replace(model=model, input=list(self.input) or [str(bundled.sample_path())],
                            trust_correct=self.labeling.effective_trust_correct(), **machine)

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
        identity. ``strategy_option``: a strategy whose registry entry does not read it ignores the option, so its setting never
        refuses a refresh; an ``identity=True`` option scoped after corpora were written (wave_size,
        early_stop, confidence_width) is then recorded at its default, as those corpora hashed it."""
        md = _fields()[name][1].metadata
        mode = md.get("identity")
        if self.labeling.ignores(name):  # an option this strategy does not read
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
