"""The options of ``mcprm label``, one documented section per concern, and their defaults (each declared once,
here or with the part it configures): :class:`ReadingOptions`, :class:`WritingOptions`, :class:`PromptingOptions`,
:class:`SamplingOptions`, :class:`LabelingOptions`, :class:`GradingOptions`, :class:`ExecutionOptions` (the
backends' own sections are declared with the backends, :mod:`rollouts.options`). A section has one name: the
class ``SamplingOptions`` is the section ``sampling`` of :class:`pipeline.config.LabelConfig`
(``cfg.sampling``), its ``--help`` panel and its docs/options.md heading "Sampling"
(:func:`pipeline.config.section_title`)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from graders.config import DEFAULT_TIMEOUT_S
from pipeline.errors import FatalError
from pipeline.input.spec import ANSWER_EXTRACTORS, FORMATS, InputSpec
from pipeline.input.split import SPLIT_MODES
from pipeline.labeling.scheduler import DEFAULT_MAX_BATCH_REQUESTS
from pipeline.labeling.strategies import (
    DEFAULT_BISECT_FRACTION,
    DEFAULT_K,
    DEFAULT_REACH_PROBE,
    DEFAULT_RELATIVE_DROP,
    DEFAULT_TARGET_CONFIDENCE,
    DEFAULT_TRUST_PASS_RATE,
    DEFAULT_UNREACHED_CLAIM,
    DEFAULT_WAVE_GROWTH,
    DEFAULT_WAVE_SIZE,
    REACH_PROBES,
    UNREACHED_CLAIMS,
)
from pipeline.labeling.strategies import STRATEGIES as STRATEGY_REGISTRY
from rollouts.options import option
from rollouts.registry import BACKENDS as BACKEND_SPECS

UNREADABLE_POLICIES = ("failure", "exclude")  # GradingOptions.unreadable (pipeline.labeling.last_step.outcome)
DEFAULT_KEEP_WARM = "1h"  # how long `mcprm fleet up`'s fleet stays warm after its last run (ExecutionOptions.keep_warm)
# how long a run's own workers stay warm on this machine after it (pipeline.execution.fleet): off, since a kept
# engine holds its GPU after the command ends; a user turns it on with --keep-warm or keep_warm in a run file
DEFAULT_LOCAL_KEEP_WARM = "off"
FLEET_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a fleet's name (--fleet): part of its Ray actors' names
DEFAULT_SHARD_SIZE = 64  # solutions per shard (WritingOptions; pipeline.ray_data's batch size)

# the strategies' names, a live view of their registry (pipeline.labeling.strategies): a strategy registered
# there is a --strategy choice, in its help and its check, with no list to keep here
STRATEGIES = STRATEGY_REGISTRY.keys()
BACKENDS = tuple(BACKEND_SPECS)  # hf, vllm, openai, sglang (rollouts/registry.py)
EXECUTORS = ("auto", "ray", "local")
PROMPT_FORMATS = ("plain", "chat")


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
class ReadingOptions:
    """What to read and how (read by :mod:`pipeline.input`; the reader checks fields and files)."""

    input: list[str] = option(help="JSONL/Parquet file, folder or glob (any fsspec URL); repeatable.",
                              factory=list, flags=("--input", "-i"), shown="the bundled sample")
    problem_field: str = option("problem", "Input field of the problem.")
    answer_field: str = option("answer", "Input field of the gold answer.")
    steps_field: str = option("steps", "Input field holding the steps (a list of strings).")
    solution_field: str = option("solution", "Input field holding the solution as one text (cut by --splitter) "
                                             "when there is no steps field.")
    id_field: str = option("id", "Input field holding the row id (optional; default: a content hash).")
    splitter: str = option("blank-line", "How a solution text is cut into steps; gsm8k: lines, without <<...>> "
                                         "annotations and the #### answer line.", choices=SPLIT_MODES)
    split_regex: str | None = option(None, "--splitter regex: the regex between steps.")
    input_format: str | None = option(None, "Input file format.", choices=FORMATS, shown="by file extension")
    answer_extract: str | None = option(None, "Take the gold answer out of a worked answer field (gsm8k: after "
                                              "####; boxed: the last \\boxed{}).", choices=ANSWER_EXTRACTORS,
                                        shown="the field as it is")
    max_step_chars: int = option(20000, "Reject steps longer than this many characters.")
    max_steps: int = option(200, "Reject solutions with more steps.")
    skip_bad: bool = option(False, "Write bad rows (invalid, too long for the model) to rejects/ and label the "
                                   "rest.", shown="off: a bad row stops the run")
    limit: int | None = option(None, "Label the first N valid solutions.", shown="all")

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
class WritingOptions:
    """Where the corpus goes and how it is cut into shards."""

    output: str = option("./mcprm-out", "Output corpus folder (any fsspec URL).", flags=("--output", "-o"))
    overwrite: bool = option(False, "Start a new corpus version with other settings on an existing output.")
    drop_damaged: bool = option(False, "Let a refresh drop the rows of damaged shards the input no longer holds "
                                       "(recorded in the manifest).", shown="off: refused")
    shard_size: int = option(DEFAULT_SHARD_SIZE, "Solutions per shard (the unit of work and resume).")

    def problems(self) -> list[str]:
        out: list[str] = []
        _at_least(out, "shard_size", self.shard_size, 1)
        return out


@dataclass
class PromptingOptions:
    """The model, the prompt it is given, and the backend that runs it."""

    model: str = option("", "Model folder or hub name (--backend openai: the name the server serves).", identity=True, shown="the bundled model")
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
    temperature: float = option(1.0, "Continuations' sampling temperature.", identity=True)
    top_p: float = option(1.0, "Continuations' nucleus top-p.", identity=True)
    max_new_tokens: int = option(256, "Most tokens a continuation may generate (one that ends without an answer "
                                      "counts as incorrect).", identity=True)
    seed: int = option(0, "Run seed (every request's derives from it).",
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
class LabelingOptions:
    """Which steps get rollouts, and how many (docs/labels.md, "Strategies")."""

    strategy: str = option("binary-search", "Labeling strategy (docs/labels.md).", identity=True, choices=STRATEGIES)
    wave_size: int = option(DEFAULT_WAVE_SIZE, "adaptive / binary-search: continuations per wave.",
                            identity=True, strategy_option=True)
    wave_growth: float = option(DEFAULT_WAVE_GROWTH, "adaptive / binary-search: each wave of a probe is this many "
                                                     "times the one before (1 = equal waves).",
                                identity="non-default", legacy=1.0, strategy_option=True)
    speculate: bool = option(True, "binary-search: a probe's first round also samples both possible next "
                                   "probes (fewer GPU rounds, ~3% more tokens, same labels).", strategy_option=True)
    confidence_width: float | None = option(None, "adaptive: keep sampling a positive step until its 95% interval "
                                                  "is narrower than this.", identity=True,
                                            shown="off", strategy_option=True)
    trust_correct: bool | None = option(None, "Label solutions with a correct final answer positive without "
                                              "rollouts.", identity=True,
                                        shown="on; off for " + ", ".join(
                                            n for n, s in STRATEGY_REGISTRY.items() if not s.trusts_correct))
    early_stop: bool = option(True, "binary-search: stop a probe at its first success (off = K per probe, "
                                    "OmegaPRM's original).", identity=True,
                            strategy_option=True)
    bisect_fraction: float = option(DEFAULT_BISECT_FRACTION, "binary-search: the next probe's place between the last live and first "
                                         "dead prefix (0.5 = midpoint).",
                                    identity="non-default", legacy=0.5, strategy_option=True)
    relative_drop: float = option(DEFAULT_RELATIVE_DROP, "binary-search: a prefix under this fraction of the last live "
                                               "prefix's success rate is dead; 0 = any success is alive.",
                                         identity="non-default", legacy=0.0, strategy_option=True)
    reach_gate: bool = option(False, "binary-search: probe the bare problem and step 1 first; no claim on a "
                                     "solution neither reaches (docs/labels.md).",
                              identity="non-default", legacy=False, strategy_option=True)
    trust_pass_rate: float = option(DEFAULT_TRUST_PASS_RATE, "--reach-gate: trust a right answer from this pass "
                                                             "rate up.",
                                    identity="non-default", strategy_option=True)
    unreached_claim: str = option(DEFAULT_UNREACHED_CLAIM, "--reach-gate: an unreached solution's first error "
                                                             "(docs/labels.md).",
                                  identity="non-default", choices=UNREACHED_CLAIMS, strategy_option=True)
    reach_probe: str = option(DEFAULT_REACH_PROBE, "--reach-gate: pass rate of the bare problem's K draws or "
                                                   "of step 1's until trust is settled.",
                              identity="non-default", choices=REACH_PROBES, strategy_option=True)
    reuse_rollouts: bool = option(True, "Count a continuation that writes the solution's next steps verbatim as a "
                                        "draw of those later prefixes too (no extra tokens; docs/labels.md).",
                                  identity="non-default", legacy=False)
    # the sequential strategy's stopping rules (pipeline/labeling/sequential.py)
    target_confidence: float = option(DEFAULT_TARGET_CONFIDENCE, "sequential: stop when the first error's posterior probability "
                                           "reaches this.", identity="non-default",
                                      strategy_option=True)
    max_tokens_per_solution: int | None = option(None, "sequential: a solution's token budget.",
                                                 identity="non-default",
                                                 shown="off", strategy_option=True)

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "strategy", self.strategy, STRATEGIES)
        if not 0 < self.target_confidence < 1:
            out.append(f"--target-confidence must be in (0, 1), got {self.target_confidence}")
        _at_least(out, "max_tokens_per_solution", self.max_tokens_per_solution, 1)
        _at_least(out, "wave_size", self.wave_size, 1)
        if not 1 <= self.wave_growth <= 16:
            out.append(f"--wave-growth must be in [1, 16], got {self.wave_growth}")
        if not 0 <= self.relative_drop < 1:
            out.append(f"--relative-drop must be in [0, 1), got {self.relative_drop}")
        if not 0 <= self.trust_pass_rate <= 1:
            out.append(f"--trust-pass-rate must be in [0, 1], got {self.trust_pass_rate}")
        _one_of(out, "unreached_claim", self.unreached_claim, UNREACHED_CLAIMS)
        _one_of(out, "reach_probe", self.reach_probe, REACH_PROBES)
        if self.reach_gate and self.strategy in STRATEGY_REGISTRY and self.ignores("reach_gate"):
            gated = " or ".join(n for n, st in STRATEGY_REGISTRY.items() if "reach_gate" in st.reads)
            out.append(f"--reach-gate is an option of --strategy {gated}, not {self.strategy}")
        if not 0 < self.bisect_fraction < 1:
            out.append(f"--bisect-fraction must be in (0, 1), got {self.bisect_fraction}")
        if self.confidence_width is not None and not 0 < self.confidence_width < 1:
            out.append(f"--confidence-width must be in (0, 1), got {self.confidence_width}")
        return out

    def ignores(self, name: str) -> bool:
        """Whether this section's strategy ignores option ``name``: a strategy's option (``strategy_option``)
        its registry entry does not read (:attr:`pipeline.labeling.strategies.Strategy.reads`)."""
        f = next((f for f in dataclasses.fields(self) if f.name == name), None)
        return bool(f and f.metadata.get("strategy_option")) and name not in STRATEGY_REGISTRY[self.strategy].reads

    def effective_trust_correct(self) -> bool:
        if self.trust_correct is not None:
            return bool(self.trust_correct)
        return STRATEGY_REGISTRY[self.strategy].trusts_correct


@dataclass
class GradingOptions:
    """How a continuation's final answer is compared with the gold answer (:mod:`graders`)."""

    grader: str = option("sympy", "Answer grader: sympy | exact | math-verify | a registered grader.",
                         identity=True)
    grader_timeout: float = option(DEFAULT_TIMEOUT_S, "Seconds one answer comparison may take (then ungradable).",
                                   identity=True)
    unreadable: str = option("failure", "A continuation whose answer the grader cannot read: failure "
                                        "(Math-Shepherd's) or exclude (left out of the counts).", identity="non-default", legacy="exclude",
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
class ExecutionOptions:
    """Where and how widely shards run (performance only: never part of the identity)."""

    executor: str = option("auto", "Where shards run: auto = local (in-process) on a small machine (< 4 CPUs, no "
                                   "GPU) unless --ray-address is given, else ray.", choices=EXECUTORS)
    ray_address: str | None = option(None, "Ray cluster address (or RAY_ADDRESS).", envvar="RAY_ADDRESS",
                                     shown="a local Ray")
    wait_for_resources: float = option(0.0, "ray: seconds to wait for workers' GPUs/CPUs (autoscaling).")
    num_workers: int | None = option(None, "Rollout actors (hf: CPU actors; vllm: one per GPU).",
                                     shown="one per GPU (vllm) or CPU slot (hf), at most one per shard")
    cpus_per_worker: float | None = option(None, "CPUs per worker (hf: torch threads; every backend: grader "
                                                 "processes).",
                                           shown="hf/openai: 1; vllm: the node's CPUs per GPU, at most 8")
    gpus_per_worker: float = option(0.0, "GPUs per worker.", shown="vllm: --tensor-parallel-size; hf: 0")
    # an adaptive strategy's shard ends with its slowest solution, and a binary search keeps only one or two
    # continuations per solution in flight: a GPU engine needs many shards at once to stay full (solutions in
    # flight per worker = this x --shard-size). Not given: the executor polls each worker's demand while its
    # shards run and raises its count while its engines run fewer sequences than they can (pipeline.execution.demand)
    shards_per_worker: int | None = option(None, "Shards a worker labels at once (fixed).",
                                           shown="vllm: to fill its engines, up to 32; else 1")
    # the end of a job on a GPU engine (pipeline.labeling.scheduler.Scheduler.tail_fill)
    tail_fill: int | None = option(None, "Draw later waves ahead under N in flight (same labels).",
                                   shown="vllm: engine capacity; else 0")
    # a warm fleet of named detached Ray actors kept between runs (pipeline/execution/fleet.py)
    fleet: str | None = option(None, "ray: borrow the warm fleet NAME's workers (`mcprm fleet up`): no engine "
                                     "start; its engine options must be this run's (docs/refresh.md).",
                               shown="off")
    keep_warm: str | None = option(None, "How long workers stay warm for the next run (90s, 30m, 2h; 0: stop; "
                                         "`mcprm fleet down` stops them).",
                                   shown=f"label: {DEFAULT_LOCAL_KEEP_WARM}; fleet up: {DEFAULT_KEEP_WARM}")
    max_batch_requests: int = option(DEFAULT_MAX_BATCH_REQUESTS, "Requests handed to the backend per generate() call.", cli=False)
    progress: bool = option(True, "Live progress (the CLI: --progress / --quiet).", cli=False)
    ray_logs: bool = option(False, "Show Ray's own log lines (workers' output) in the terminal (the CLI: -v).",
                            cli=False)

    def problems(self) -> list[str]:
        out: list[str] = []
        _one_of(out, "executor", self.executor, EXECUTORS)
        _at_least(out, "num_workers", self.num_workers, 1)
        _at_least(out, "shards_per_worker", self.shards_per_worker, 1)
        _at_least(out, "tail_fill", self.tail_fill, 0)
        if self.wait_for_resources < 0:
            out.append(f"--wait-for-resources must be >= 0 seconds, got {self.wait_for_resources}")
        if (self.cpus_per_worker is not None and self.cpus_per_worker <= 0) or self.gpus_per_worker < 0:
            out.append(f"--cpus-per-worker must be > 0 and --gpus-per-worker >= 0, got {self.cpus_per_worker} "
                       f"and {self.gpus_per_worker}")
        _at_least(out, "max_batch_requests", self.max_batch_requests, 1)
        if self.fleet is not None and not FLEET_NAME.fullmatch(self.fleet):
            out.append(f"--fleet must be a name of letters, digits, '.', '_' or '-' (at most 64), got {self.fleet!r}")
        if self.fleet is not None and self.executor == "local":
            out.append("--fleet borrows a Ray cluster's workers: it cannot run with --executor local")
        if self.keep_warm is not None:
            try:
                keep = parse_keep_warm(self.keep_warm)
            except ValueError as e:
                out.append(f"--keep-warm: {e}")
            else:
                if keep and self.fleet is None and self.ray_address:
                    out.append("--keep-warm without --fleet keeps a run's workers on this machine: on a Ray "
                               "cluster, start a fleet (`mcprm fleet up`) and pass --fleet NAME")
                elif keep and self.executor == "local":
                    out.append("--keep-warm keeps Ray workers: it cannot run with --executor local")
        return out


def parse_keep_warm(text: str | float) -> float:
    """``--keep-warm``: a duration (:func:`parse_duration`), or 0 / ``off``: not kept."""
    return 0.0 if str(text).strip().lower() in ("0", "0s", "off", "no") else parse_duration(text)


def parse_duration(text: str | float) -> float:
    """Seconds in a duration as people write it: ``90``, ``90s``, ``30m``, ``2h``, ``1d`` (``--keep-warm``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text).lower())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"expected a duration such as 90s, 30m, 2h or 1d, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
