"""``mcprm label``: label solutions with K rollouts per step prefix and write Parquet shards."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated

import typer

from cli.common import echo, user_errors
from pipeline.config import BACKENDS, EXECUTORS, STRATEGIES, VLLM_ENGINES, LabelConfig
from pipeline.input.split import SPLIT_MODES


def _enum(name: str, values) -> type[enum.Enum]:
    return enum.Enum(name, {v: v for v in values}, type=str)


Backend = _enum("Backend", BACKENDS)
Strategy = _enum("Strategy", STRATEGIES)
PromptFormat = _enum("PromptFormat", ("plain", "chat"))
Splitter = _enum("Splitter", SPLIT_MODES)
InputFormat = _enum("InputFormat", ("jsonl", "json", "parquet"))
AnswerExtract = _enum("AnswerExtract", ("gsm8k", "boxed"))
Executor = _enum("Executor", EXECUTORS)
VllmEngine = _enum("VllmEngine", VLLM_ENGINES)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(LabelConfig)}


def _o(*decls: str, help: str, field: str | None = None, default: str | None = None, **kw):
    """An option whose help ends with its default (taken from LabelConfig, the one source of defaults)."""
    if field is not None:
        v = _DEFAULTS[field]
        default = "on" if v is True else "off" if v is False else str(v)
    if default is not None:
        help = f"{help} (default: {default})"
    if any("/" in d for d in decls):
        kw.setdefault("metavar", "")
    return typer.Option(*decls, help=help, show_default=False, **kw)


def register(app: typer.Typer) -> None:
    app.command("label")(label_cmd)


def label_cmd(
    input: Annotated[list[str] | None, _o("--input", "-i", help="JSONL/Parquet file, folder or glob (any fsspec URL); repeatable.", default="the bundled sample")] = None,
    output: Annotated[str | None, _o("--output", "-o", help="Output corpus folder (any fsspec URL).", field="output")] = None,
    config: Annotated[str | None, _o("--config", "-c", help="YAML/JSON file with any of these options (options given here win).")] = None,
    model: Annotated[str | None, _o(help="Model folder or hub name; for --backend openai, the model name the server serves (GET /v1/models).", default="the bundled model")] = None,
    tokenizer: Annotated[str | None, _o(help="Tokenizer folder or name, if not the model's.", default="the model's")] = None,
    backend: Annotated[Backend | None, _o(help="Rollout engine: hf (transformers, CPU or GPU), vllm (GPUs), openai (an OpenAI-compatible server, --base-url).", field="backend")] = None,
    base_url: Annotated[str | None, _o(help="openai backend: server URL, e.g. http://127.0.0.1:8000/v1 (key: OPENAI_API_KEY).")] = None,
    strategy: Annotated[Strategy | None, _o(help="Labeling strategy (README: Labels).", field="strategy")] = None,
    k: Annotated[int | None, _o("--k", help="Continuations per step prefix.", field="k")] = None,
    temperature: Annotated[float | None, _o(help="Sampling temperature of the continuations.", field="temperature")] = None,
    top_p: Annotated[float | None, _o(help="Nucleus sampling top-p of the continuations.", field="top_p")] = None,
    max_new_tokens: Annotated[int | None, _o(help="Most tokens a continuation may generate (one that ends without an answer counts as incorrect).", field="max_new_tokens")] = None,
    seed: Annotated[int | None, _o(help="Run seed; every request's seed derives from it (same labels under any sharding).", field="seed")] = None,
    wave_size: Annotated[int | None, _o(help="adaptive / binary-search: continuations per wave.", field="wave_size")] = None,
    confidence_width: Annotated[float | None, _o(help="adaptive: keep sampling a positive step until its 95% interval is narrower than this.", default="off")] = None,
    trust_correct: Annotated[bool | None, _o("--trust-correct/--no-trust-correct", help="Label solutions with a correct final answer positive without rollouts.", default="on for binary-search/adaptive, off for per-step")] = None,
    early_stop: Annotated[bool | None, _o("--early-stop/--no-early-stop", help="binary-search: stop a probe at its first success (off = K per probe, OmegaPRM's original).", default="on")] = None,
    prompt_format: Annotated[PromptFormat | None, _o(help="plain: a text template; chat: the model's chat template.", field="prompt_format")] = None,
    prompt_template: Annotated[str | None, _o(help="plain format template with {problem}.", default="'Problem: {problem}\\nSolution:\\n'")] = None,
    step_separator: Annotated[str | None, _o(help="Text between steps.", default="plain: newline, chat: blank line")] = None,
    problem_field: Annotated[str | None, _o(help="Input field holding the problem.", field="problem_field")] = None,
    answer_field: Annotated[str | None, _o(help="Input field holding the gold answer.", field="answer_field")] = None,
    steps_field: Annotated[str | None, _o(help="Input field holding the steps (a list of strings).", field="steps_field")] = None,
    solution_field: Annotated[str | None, _o(help="Input field holding the solution as one text (cut by --splitter) when there is no steps field.", field="solution_field")] = None,
    id_field: Annotated[str | None, _o(help="Input field holding the row id (optional; default: a content hash).", field="id_field")] = None,
    splitter: Annotated[Splitter | None, _o(help="How a solution text is cut into steps; gsm8k: lines, without <<...>> annotations and the #### answer line.", field="splitter")] = None,
    split_regex: Annotated[str | None, _o(help="--splitter regex: the separator regex between steps.")] = None,
    input_format: Annotated[InputFormat | None, _o(help="Input file format.", default="by file extension")] = None,
    answer_extract: Annotated[AnswerExtract | None, _o(help="Take the gold answer out of a worked answer field (gsm8k: after ####; boxed: the last \\boxed{}).", default="the field as it is")] = None,
    max_step_chars: Annotated[int | None, _o(help="Reject steps longer than this many characters.", field="max_step_chars")] = None,
    max_steps: Annotated[int | None, _o(help="Reject solutions with more steps.", field="max_steps")] = None,
    skip_bad: Annotated[bool | None, _o("--skip-bad/--no-skip-bad", help="Write bad rows (invalid, too long for the model) to rejects/ and label the rest.", default="off: a bad row stops the run")] = None,
    limit: Annotated[int | None, _o(help="Label only the first N valid solutions.", default="all")] = None,
    overwrite: Annotated[bool | None, _o("--overwrite/--no-overwrite", help="Start a new corpus version with other settings on an existing output.", default="off")] = None,
    shard_size: Annotated[int | None, _o(help="Solutions per shard (the unit of work, resume and balance).", field="shard_size")] = None,
    num_workers: Annotated[int | None, _o(help="Rollout actors (hf: CPU actors; vllm: one per GPU).", default="one per GPU (vllm) or CPU slot (hf), at most one per shard")] = None,
    cpus_per_worker: Annotated[float | None, _o(help="CPUs per worker (hf: torch threads).", field="cpus_per_worker")] = None,
    gpus_per_worker: Annotated[float | None, _o(help="GPUs per worker.", default="vllm: --tensor-parallel-size; hf: 0")] = None,
    executor: Annotated[Executor | None, _o(help="Where shards run: auto = local (in-process) on a small machine (< 4 CPUs, no GPU) unless --ray-address is given, else ray.", field="executor")] = None,
    ray_address: Annotated[str | None, _o(envvar="RAY_ADDRESS", help="Ray cluster address (or RAY_ADDRESS).", default="a local Ray")] = None,
    wait_for_resources: Annotated[float | None, _o(help="ray: wait up to this many seconds for the GPUs/CPUs the workers need (autoscaling clusters) instead of failing at once.", field="wait_for_resources")] = None,
    device: Annotated[str | None, _o(help="hf backend: cpu | cuda.", field="device")] = None,
    tensor_parallel_size: Annotated[int | None, _o(help="vllm: GPUs per model replica (one actor each).", field="tensor_parallel_size")] = None,
    vllm_engine: Annotated[VllmEngine | None, _o(help="vllm: loop (streaming), async (vLLM's AsyncLLM) or offline (one generate call per round).", field="vllm_engine")] = None,
    grader: Annotated[str | None, _o(help="Answer grader: sympy | exact | math-verify | a registered grader.", field="grader")] = None,
    grader_timeout: Annotated[float | None, _o(help="Seconds one answer comparison may take (then ungradable).", field="grader_timeout")] = None,
    verbose: Annotated[bool, _o("--verbose/--no-verbose", "-v", help="Show Ray's own log lines and more detail.", default="off")] = False,
    quiet: Annotated[bool, _o("--quiet/--no-quiet", "-q", help="No progress output.", default="off")] = False,
    show_progress: Annotated[bool, _o("--progress/--no-progress", help="Live progress bar on a terminal (solutions, rollouts, tok/s, ETA); plain lines every 10 s when not a terminal.", default="on")] = True,
) -> None:
    """Label every step of every solution with K rollouts (default: the bundled sample and model, on CPU)."""
    import logging

    from pipeline.run import label

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="[mcprm] %(message)s")
    given = {k_: v for k_, v in locals().items() if k_ not in ("config", "quiet", "verbose", "label", "logging", "show_progress")}
    given = {k_: (v.value if isinstance(v, enum.Enum) else v) for k_, v in given.items() if v is not None and v != []}
    with user_errors(resume_hint=True):
        cfg = LabelConfig.from_file(config, **given) if config else LabelConfig.from_dict(given, source="options")
        cfg.progress = show_progress and not quiet
        cfg.ray_logs = verbose
        res = label(cfg)
    m = res.manifest or {}
    if res.added == 0:
        echo(f"{res.output}: up to date at version {res.version} ({res.reused} solutions already labeled, "
             f"{res.rejected} rejected)")
        return
    t = m.get("throughput", {})
    c = m.get("counts", {})
    echo(
        f"{res.output}: version {res.version}: labeled {res.added} solutions ({res.reused} reused, "
        f"{res.rejected} rejected), {c.get('rollouts', 0):,} rollouts, {c.get('rollout_tokens', 0):,} tokens "
        f"in {res.seconds:.1f} s"
    )
    echo(
        f"throughput: {t.get('generated_tokens_per_s') or 0:,.0f} generated tok/s, "
        f"{t.get('rollouts_per_s') or 0:,.1f} rollouts/s, prefix-cache hit rate "
        f"{'n/a' if t.get('prefix_cache_hit_rate') is None else format(t['prefix_cache_hit_rate'], '.1%')}, "
        f"GPUs {t.get('gpus', 0)}, workers {t.get('workers', 0)} (model load {t.get('startup_seconds') or 0:.1f} s, "
        f"labeling {t.get('labeling_seconds') or 0:.1f} s)"
    )
    ex = m.get("execution") or {}
    if ex:
        echo(f"executor: {ex.get('executor')} ({ex.get('reason')})")
    for w in m.get("warnings") or []:
        echo(f"warning: {w['message']}")
