"""``mcprm label``: label solutions with K rollouts per step prefix and write Parquet shards."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import echo, user_errors


def register(app: typer.Typer) -> None:
    app.command("label")(label_cmd)


def label_cmd(
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="JSONL/Parquet file, folder or glob (any fsspec URL); repeatable. Default: the bundled sample.")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Output corpus folder (any fsspec URL). Default ./mcprm-out")] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help="YAML/JSON file with any of these options.")] = None,
    model: Annotated[str | None, typer.Option(help="Model folder or name. Default: the bundled model.")] = None,
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer folder if not the model's.")] = None,
    backend: Annotated[str | None, typer.Option(help="hf | vllm | openai")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai backend: server URL, e.g. http://127.0.0.1:8000/v1")] = None,
    strategy: Annotated[str | None, typer.Option(help="per-step | binary-search | adaptive")] = None,
    k: Annotated[int | None, typer.Option("--k", help="Continuations per step prefix.")] = None,
    temperature: Annotated[float | None, typer.Option()] = None,
    top_p: Annotated[float | None, typer.Option()] = None,
    max_new_tokens: Annotated[int | None, typer.Option()] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    wave_size: Annotated[int | None, typer.Option(help="adaptive: continuations per wave")] = None,
    confidence_width: Annotated[float | None, typer.Option(help="adaptive: stop a step when its 95% interval is narrower")] = None,
    trust_correct: Annotated[bool | None, typer.Option("--trust-correct/--no-trust-correct", help="Label solutions with a correct final answer positive without rollouts (default: on for binary-search/adaptive).")] = None,
    early_stop: Annotated[bool | None, typer.Option("--early-stop/--no-early-stop", help="binary-search: stop a probe at its first success (default on; off = K per probe, OmegaPRM's original).")] = None,
    prompt_format: Annotated[str | None, typer.Option(help="plain | chat")] = None,
    prompt_template: Annotated[str | None, typer.Option(help="plain format template with {problem}")] = None,
    step_separator: Annotated[str | None, typer.Option(help="Text between steps (plain: newline, chat: blank line)")] = None,
    problem_field: Annotated[str | None, typer.Option()] = None,
    answer_field: Annotated[str | None, typer.Option()] = None,
    steps_field: Annotated[str | None, typer.Option()] = None,
    solution_field: Annotated[str | None, typer.Option()] = None,
    id_field: Annotated[str | None, typer.Option()] = None,
    splitter: Annotated[str | None, typer.Option(help="blank-line | step-prefix | newline | regex")] = None,
    split_regex: Annotated[str | None, typer.Option()] = None,
    input_format: Annotated[str | None, typer.Option(help="jsonl | json | parquet (default: by extension)")] = None,
    answer_extract: Annotated[str | None, typer.Option(help="gsm8k | boxed: take the gold answer out of a worked answer")] = None,
    max_step_chars: Annotated[int | None, typer.Option(help="Reject steps longer than this.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Reject solutions with more steps.")] = None,
    skip_bad: Annotated[bool | None, typer.Option("--skip-bad", help="Write bad rows to rejects/ and go on.")] = None,
    limit: Annotated[int | None, typer.Option(help="Label only the first N valid solutions.")] = None,
    overwrite: Annotated[bool | None, typer.Option("--overwrite", help="Replace a corpus made with other settings.")] = None,
    shard_size: Annotated[int | None, typer.Option(help="Solutions per shard.")] = None,
    num_workers: Annotated[int | None, typer.Option(help="Rollout actors (hf: CPU actors; vllm: default one per GPU).")] = None,
    cpus_per_worker: Annotated[float | None, typer.Option()] = None,
    gpus_per_worker: Annotated[float | None, typer.Option()] = None,
    executor: Annotated[str | None, typer.Option(help="ray (default) | local (in-process, for debugging)")] = None,
    ray_address: Annotated[str | None, typer.Option(envvar="RAY_ADDRESS", help="Ray cluster address; default: a local Ray.")] = None,
    wait_for_resources: Annotated[float | None, typer.Option(help="ray: wait up to this many seconds for the GPUs/CPUs the workers need (autoscaling clusters) instead of failing at once. Default 0.")] = None,
    device: Annotated[str | None, typer.Option(help="hf backend: cpu | cuda")] = None,
    tensor_parallel_size: Annotated[int | None, typer.Option()] = None,
    vllm_engine: Annotated[str | None, typer.Option(help="vllm: loop (streaming, default), async (vLLM's "
                                                         "AsyncLLM) or offline (one generate call per round)")] = None,
    grader: Annotated[str | None, typer.Option(help="sympy | exact | a registered grader")] = None,
    grader_timeout: Annotated[float | None, typer.Option()] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Label every step of every solution with K rollouts (default: the bundled sample and model, on CPU)."""
    import logging

    from pipeline.config import LabelConfig
    from pipeline.run import label

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="[mcprm] %(message)s")
    given = {k_: v for k_, v in locals().items() if k_ not in ("config", "quiet", "LabelConfig", "label", "logging")}
    given = {k_: v for k_, v in given.items() if v is not None and v != []}
    with user_errors():
        cfg = LabelConfig.from_file(config, **given) if config else LabelConfig.from_dict(given, source="options")
        cfg.progress = not quiet
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
