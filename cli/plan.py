"""``mcprm plan``: estimate rollouts, generated tokens and GPU-hours of a run from a small pilot."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import preflight, user_errors
from cli.label import option_help
from cli.options import option_enum
from pipeline.commands.plan import DEFAULT_GPU_TOKENS_PER_S, DEFAULT_PILOT
from pipeline.options import BACKENDS, STRATEGIES


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)


_Strategy = option_enum("Strategy", STRATEGIES)
_Backend = option_enum("Backend", BACKENDS)


def plan_cmd(
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help=option_help("input"))] = None,
    model: Annotated[str | None, typer.Option(help=option_help("model"), show_default=False)] = None,
    strategy: Annotated[_Strategy | None, typer.Option(help=option_help("strategy"), show_default=False)] = None,
    k: Annotated[int | None, typer.Option("--k", help=option_help("k"), show_default=False)] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help=option_help("max_new_tokens"), show_default=False)] = None,
    temperature: Annotated[float | None, typer.Option(help=option_help("temperature"), show_default=False)] = None,
    backend: Annotated[_Backend | None, typer.Option(help=option_help("backend"), show_default=False)] = None,
    base_url: Annotated[str | None, typer.Option(help=option_help("base_url"), show_default=False)] = None,
    device: Annotated[str | None, typer.Option(help=option_help("device"), show_default=False)] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help="A run file (YAML/JSON) as for `mcprm label` "
                                                                      "(options given here win).")] = None,
    pilot: Annotated[int, typer.Option(help="Solutions in the pilot run.")] = DEFAULT_PILOT,
    gpu_tokens_per_s: Annotated[float, typer.Option(help="Assumed generation throughput of one GPU "
                                                          "(decode tokens/s, batched).")] = DEFAULT_GPU_TOKENS_PER_S,
    seed: Annotated[int, typer.Option(help="Seed of the pilot sample and the bootstrap.")] = 0,
    engines: Annotated[int, typer.Option(help="Engines (GPUs) the run will start: each holds its GPU for the "
                                              "start-up the pilot measured.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a small pilot (in-process) and extrapolate the cost of labeling the whole input, with a 95% CI."""
    from pipeline.commands.plan import plan
    from pipeline.config import LabelConfig

    given = {"input": input, "model": model, "strategy": strategy and strategy.value, "k": k,
             "max_new_tokens": max_new_tokens, "temperature": temperature, "backend": backend and backend.value,
             "base_url": base_url, "device": device}
    given = {key: v for key, v in given.items() if v is not None}
    with user_errors():
        cfg = LabelConfig.from_file(config, **given) if config else LabelConfig.from_dict(given, source="options")
        cfg.progress = False
        preflight(cfg, output=False)
        res = plan(cfg, pilot=pilot, gpu_tokens_per_s=gpu_tokens_per_s, seed=seed, engines=engines)
    if as_json:
        print(json.dumps(res.to_dict(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    title = (f"plan: {res.solutions:,} solutions, strategy {res.strategy}, K={res.k}, pilot of {res.pilot} "
             f"({res.pilot_seconds:.1f} s)")
    if res.exact:  # the pilot was the whole input: exact counts, no interval around them
        t = Table(title=title + ": the whole input, exact")
        t.add_column("")
        t.add_column("per solution", justify="right")
        t.add_column("whole input", justify="right")
    else:
        t = Table(title=title)
        t.add_column("")
        t.add_column("per solution", justify="right")
        t.add_column("95% CI", justify="right")
        t.add_column("whole input", justify="right")
        t.add_column("95% CI", justify="right")
    for name, e, f, g in (("rollouts", res.rollouts, "{:,.1f}", "{:,.0f}"),
                          ("generated tokens", res.tokens, "{:,.1f}", "{:,.0f}"),
                          (f"GPU-hours at {res.gpu_tokens_per_s:,.0f} tok/s", res.gpu_hours, "{:.3g}", "{:,.4g}"),
                          (f"GPU-hours incl. start ({res.engines} x {res.start_seconds:.0f} s)",
                           res.gpu_hours_incl_start, "{:.3g}", "{:,.4g}")):
        if res.exact:
            t.add_row(name, f.format(e.per_solution), g.format(e.total))
        else:
            t.add_row(name, f.format(e.per_solution),
                      f"{f.format(e.per_solution_ci[0])} - {f.format(e.per_solution_ci[1])}",
                      g.format(e.total), f"{g.format(e.total_ci[0])} - {g.format(e.total_ci[1])}")
    Console().print(t)
    print(f"steps per solution: {res.steps_per_solution:.1f}; pilot throughput on this machine: "
          f"{res.pilot_tokens_per_s:,.0f} generated tokens/s. GPU-hours count decode only (prefill, grading "
          "and scheduling come on top); with the start: plus each engine's start-up as measured in the pilot "
          f"({res.start_seconds:.1f} s).")
    for n in res.notes:
        print(f"note: {n}")
