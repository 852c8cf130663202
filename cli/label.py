"""``mcprm label``: label solutions with K rollouts per step prefix and write Parquet shards."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer

from cli.common import echo, preflight, user_errors
from cli.options import field_help, field_param, given, typer_option
from pipeline.config import LabelConfig, option_fields, section_of, section_title


def option_help(name: str) -> str:
    """A ``mcprm label`` option's description with its default, both from where the option is declared
    (pipeline/options.py, rollouts/options.py)."""
    return field_help(option_fields()[name][0])


COMMAND_PANEL = "This command"


def option_param(name: str, f, typ) -> inspect.Parameter:
    """A ``mcprm label`` option made from its config field, in its section's help panel."""
    return field_param(f, typ, panel=section_title(section_of(name)))


CLI_ONLY = [  # options of the command itself, not of the run
    inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer_option("--config", "-c", help="YAML/JSON file with any of these options (options given here win).",
                              rich_help_panel=section_title("reading"))]),
    inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer_option("--verbose/--no-verbose", "-v", help="Show Ray's own log lines and more detail. (default: off)",
                          rich_help_panel=COMMAND_PANEL)]),
    inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer_option("--quiet/--no-quiet", "-q", help="No progress output. (default: off)", rich_help_panel=COMMAND_PANEL)]),
    inspect.Parameter("show_progress", inspect.Parameter.KEYWORD_ONLY, default=True, annotation=Annotated[
        bool, typer_option("--progress/--no-progress", help="Live progress bar on a terminal (solutions, rollouts, tok/s, "
                                                  "ETA); plain lines every 10 s when not a terminal. (default: on)",
                                                  rich_help_panel=COMMAND_PANEL)]),
]


def _signature() -> inspect.Signature:
    run_options = [option_param(n, f, t) for n, (f, t) in option_fields().items() if f.metadata.get("cli", True)]
    first = [p for p in run_options if p.name in ("input", "output")]  # then --config, then the tree's order
    rest = [p for p in run_options if p.name not in ("input", "output")]
    return inspect.Signature(first + CLI_ONLY[:1] + rest + CLI_ONLY[1:])


def option_table() -> str:
    """docs/options.md's option tables (Markdown), made from the same field docs as ``--help``: one table per
    section under its heading (the section's ``--help`` panel title), every option of a run, those without a
    command-line flag marked "run file only"."""
    rows: list[str] = []
    section = None
    for name, (f, _) in option_fields().items():
        if section_of(name) != section:
            section = section_of(name)
            rows += [*([""] if rows else []), f"## {section_title(section)}", "",
                     "| option | meaning (default) |", "| --- | --- |"]
        text = option_help(name).replace("|", "\\|")
        if f.metadata.get("cli", True):
            rows.append(f"| `--{name.replace('_', '-')}` | {text} |")
        else:
            rows.append(f"| `{name}` (run file only) | {text} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m cli.label: print docs/options.md's option table
    print(option_table(), end="")


def register(app: typer.Typer) -> None:
    app.command("label")(label_cmd)


def label_cmd(**options: Any) -> None:
    """Label every step of every solution with K rollouts (default: the bundled sample and model, on CPU)."""
    import logging

    from pipeline.run import label

    config, verbose, quiet = options.pop("config"), options.pop("verbose"), options.pop("quiet")
    show_progress = options.pop("show_progress")
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="[mcprm] %(message)s")
    set_here = given(options)
    with user_errors(resume_hint=True):
        cfg = LabelConfig.from_file(config, **set_here) if config else LabelConfig.from_dict(set_here, source="options")
        cfg.progress = show_progress and not quiet
        cfg.ray_logs = verbose
        if cfg.limit == 0:  # said as such, not as "no valid solutions" after a pass over the input
            from pipeline.config import ConfigError

            raise ConfigError("--limit 0 labels nothing: pass --limit N (N >= 1) to label the first N valid "
                              "solutions, or leave --limit out to label them all")
        preflight(cfg)  # a device this machine lacks, an output that is a file: said before any work
        res = label(cfg)
    m = res.manifest or {}
    if not res.committed:
        echo(f"{res.output}: up to date at version {res.version} ({res.reused} solutions already labeled, "
             f"{res.rejected} rejected)")
        _next_steps(res.output)
        return
    t = m.get("throughput", {})
    c = m.get("counts", {})
    # rows in the version's new shards: a row a worker failed on (quarantined, --skip-bad) is rejected, not labeled
    labeled = c.get("added", res.added)
    # this run's own rollouts and tokens beside its time (a resumed run did not label the shards it took over)
    resumed = f", {res.shards_resumed} finished shards taken over from the interrupted run" if res.shards_resumed else ""
    echo(
        f"{res.output}: version {res.version}: labeled {labeled} solutions ({res.reused} reused, "
        f"{res.rejected} rejected{resumed}"
        + (f", {c['dropped']} rows of damaged shards left out (--drop-damaged)" if c.get("dropped") else "")
        + f"); this run: {t.get('rollouts', c.get('rollouts', 0)):,} rollouts, "
        f"{t.get('rollout_tokens', c.get('rollout_tokens', 0)):,} tokens in {res.seconds:.1f} s"
        + (f"; {c['reused_rollouts']:,} continuations also counted for a later step (rollout reuse)"
           if c.get("reused_rollouts") else "")
        + (f"; {c['drawn_ahead_dropped']:,} drawn ahead and dropped (--tail-fill)" if c.get("drawn_ahead_dropped")
           else "")
    )
    echo(
        f"throughput: {t.get('generated_tokens_per_s') or 0:,.0f} generated tok/s, "
        f"{t.get('rollouts_per_s') or 0:,.1f} rollouts/s, prefix-cache hit rate "
        f"{'n/a' if t.get('prefix_cache_hit_rate') is None else format(t['prefix_cache_hit_rate'], '.1%')}, "
        f"GPUs {t.get('gpus', 0)}, workers {t.get('workers', 0)} (model load {t.get('startup_seconds') or 0:.1f} s"
        + (f" after the input pass hid {t['startup_overlap_seconds']:.1f} s of it"
           if t.get("startup_overlap_seconds") else "") + ", "
        f"labeling {t.get('labeling_seconds') or 0:.1f} s)"
        + (f"; {t['gpu_seconds']:,.0f} GPU-seconds ({t['gpu_seconds_per_solution']:.3f} per solution)"
           if t.get("gpu_seconds") and t.get("gpu_seconds_per_solution") else "")
    )
    d = t.get("engine_demand") or {}
    if d.get("capacity"):
        echo(f"engine demand: {d['mean_in_flight']:,.0f} continuations in flight per worker on average (p10 "
             f"{d['p10']:,}, p90 {d['p90']:,}); its engines run {d['capacity']:,} at once: fewer in flight "
             f"{d['share_below_capacity']:.0%} of the labeling time"
             + (f"; shards at once per worker by the end: {', '.join(map(str, d['shards_at_once']))}"
                if d.get("shards_at_once") else "")
             + (" (--shards-per-worker N labels more shards at once on each worker)"
                if d["share_below_capacity"] >= 0.5 and not d.get("shards_at_once") else ""))
    if d.get("engine_samples"):
        echo(f"engine load: vLLM ran {d['engine_running_mean']:,.0f} sequences per worker on average (most "
             f"{d['engine_running_max']:,}) with {d['engine_waiting_mean']:,.0f} waiting"
             + (f"; KV cache at most {d['kv_cache_usage_max']:.0%} full" if d.get("kv_cache_usage_max") is not None
                else "")
             + (f"; a step took {d['engine_step_ms']:.1f} ms for {d['engine_tokens_per_step']:,.0f} tokens"
                if d.get("engine_step_ms") else ""))
    rs = m.get("rollout_success") or {}
    if rs.get("continuations_graded"):
        un = rs.get("continuations_unreadable") or 0
        how = "counted as failures" if cfg_unreadable(m) == "failure" else "left out (--unreadable exclude)"
        echo(f"continuations: {rs['continuations_graded']:,} graded, {rs['continuations_correct']:,} reached the "
             f"gold answer, {un:,} with an unreadable answer ({un / rs['continuations_graded']:.1%}, {how})")
    ex = m.get("execution") or {}
    if ex:
        echo(f"executor: {ex.get('executor')} ({ex.get('reason')})")
    for w in m.get("warnings") or []:
        echo(f"warning: {w['message']}")
    _next_steps(res.output)


def cfg_unreadable(manifest: dict) -> str:
    return (manifest.get("config") or {}).get("unreadable", "failure")


def _synthetic_task(output: str) -> bool:
    """Whether the corpus holds the bundled synthetic task (its first rows' problems parse), which `mcprm eval`
    judges with its exact checker; other data needs reference labels."""
    try:
        from pipeline.bundled.synthetic import parse_problem
        from pipeline.corpus import iter_corpus

        batch = next(iter(iter_corpus(output, None, ["problem"], batch_rows=16)), None)
        problems = batch.column("problem").to_pylist() if batch is not None else []
        for p in problems:
            parse_problem(p)
        return bool(problems)
    except Exception:  # noqa: BLE001 - not the bundled task (ValueError), or unreadable: the FILE form is right
        return False


def _next_steps(output: str) -> None:
    """What to run next on the corpus just written, with its actual path (a newcomer's next commands, in order)."""
    import shlex

    bundled = _synthetic_task(output)
    out = shlex.quote(output)
    ref = "" if bundled else " --reference FILE"
    echo(f"next: mcprm stats {out}   (counts, label balance)")
    echo(f"      mcprm eval {out}{ref}   (label quality against "
         + ("the bundled task's exact checker)" if bundled else "reference labels: ProcessBench/PRM800K-style)"))
    echo(f"      mcprm export {out} --format trl --output {shlex.quote(output.rstrip('/') + '-trl')}   "
         "(training rows)")
    echo(f"      mcprm report {out}   (an HTML report with figures)")
    prm = shlex.quote(output.rstrip("/") + "-prm")
    sols = shlex.quote(output.rstrip("/") + "-new8.jsonl")
    scored = shlex.quote(output.rstrip("/") + "-scored")
    echo(f"      mcprm train {out} --output {prm}   (a PRM trained on these labels; docs/training.md)")
    echo(f"      mcprm generate --n 8 --output {sols}" + ("" if bundled else " --input PROBLEMS --model M")
         + "   (8 new solutions per problem to score" + (": the bundled problems and model, on CPU)" if bundled
                                                        else ")"))
    echo(f"      mcprm score {prm} --input {sols} --output {scored}   (per-step PRM scores, no rollouts)")
    echo(f"      mcprm bestofn {scored}   (best-of-N: the PRM's pick against majority vote)")


label_cmd.__signature__ = _signature()  # type: ignore[attr-defined]  # the options, from the config's fields
