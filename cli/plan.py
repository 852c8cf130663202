"""``mcprm plan``: estimate rollouts, generated tokens and GPU-hours of a run from a small pilot."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import preflight, user_errors


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)


def plan_cmd(
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="JSONL/Parquet file, folder or glob; "
                                                    "repeatable. Default: the bundled sample.")] = None,
    model: Annotated[str | None, typer.Option(help="Model path or name (default: the bundled model).")] = None,
    strategy: Annotated[str | None, typer.Option(help="per-step | binary-search | adaptive")] = None,
    k: Annotated[int | None, typer.Option("--k", help="Continuations per step prefix.")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Token limit of one continuation.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: 1.0).")] = None,
    backend: Annotated[str | None, typer.Option(help="hf | vllm | openai")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai backend: server URL.")] = None,
    device: Annotated[str | None, typer.Option(help="cpu | cuda")] = None,
    config: Annotated[str | None, typer.Option(help="A run file (YAML/JSON) as for `mcprm label`.")] = None,
    pilot: Annotated[int, typer.Option(help="Solutions in the pilot run.")] = 32,
    gpu_tokens_per_s: Annotated[float, typer.Option(help="Assumed generation throughput of one GPU "
                                                          "(decode tokens/s, batched).")] = 20_000.0,
    seed: Annotated[int, typer.Option(help="Seed of the pilot sample and the bootstrap.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a small pilot (in-process) and extrapolate the cost of labeling the whole input, with a 95% CI."""
    from pipeline.commands.plan import plan
    from pipeline.config import LabelConfig

    given = {"input": input, "model": model, "strategy": strategy, "k": k, "max_new_tokens": max_new_tokens,
             "temperature": temperature, "backend": backend, "base_url": base_url, "device": device}
    given = {key: v for key, v in given.items() if v is not None}
    with user_errors():
        cfg = LabelConfig.from_file(config, **given) if config else LabelConfig.from_dict(given, source="options")
        cfg.progress = False
        preflight(cfg, output=False)
        res = plan(cfg, pilot=pilot, gpu_tokens_per_s=gpu_tokens_per_s, seed=seed)
    if as_json:
        print(json.dumps(res.to_dict(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"plan: {res.solutions:,} solutions, strategy {res.strategy}, K={res.k}, pilot of {res.pilot} "
                    f"({res.pilot_seconds:.1f} s)")
    t.add_column("")
    t.add_column("per solution", justify="right")
    t.add_column("95% CI", justify="right")
    t.add_column("whole input", justify="right")
    t.add_column("95% CI", justify="right")
    for name, e, f, g in (("rollouts", res.rollouts, "{:,.1f}", "{:,.0f}"),
                          ("generated tokens", res.tokens, "{:,.1f}", "{:,.0f}"),
                          (f"GPU-hours at {res.gpu_tokens_per_s:,.0f} tok/s", res.gpu_hours, "{:.3g}", "{:,.4g}")):
        t.add_row(name, f.format(e.per_solution), f"{f.format(e.per_solution_ci[0])} - {f.format(e.per_solution_ci[1])}",
                  g.format(e.total), f"{g.format(e.total_ci[0])} - {g.format(e.total_ci[1])}")
    Console().print(t)
    print(f"steps per solution: {res.steps_per_solution:.1f}; pilot throughput on this machine: "
          f"{res.pilot_tokens_per_s:,.0f} generated tokens/s. GPU-hours count decode only (prefill, grading "
          "and scheduling come on top).")
    for n in res.notes:
        print(f"note: {n}")
