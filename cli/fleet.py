"""``mcprm fleet up | status | down``: a warm fleet of rollout workers kept on a running Ray cluster between runs
(pipeline/execution/fleet.py), which ``mcprm label --fleet NAME`` borrows: no engine start. Without a cluster
address, ``status`` and ``down`` see the workers ``mcprm label --keep-warm`` keeps on this machine."""

from __future__ import annotations

import enum
import inspect
from typing import Annotated, Any

import typer

from cli.common import echo, user_errors
from cli.help import HelpCommand, McprmGroup

# `fleet up` takes the options of `mcprm label` that decide the engine and the workers, declared where label's are
# (pipeline/options.py, rollouts/options.py): the same names, the same help, the same run file (--config).
ENGINE_SECTIONS = ("prompting", "hf", "vllm", "openai")
UP_OPTIONS = ("seed", "ray_address", "wait_for_resources", "num_workers", "cpus_per_worker", "gpus_per_worker",
              "keep_warm", "grader")
PROMPT_ONLY = ("prompt_format", "prompt_template", "step_separator")  # a run's own, not the engine's


def _up_names() -> list[str]:
    import dataclasses

    from pipeline.config import SECTIONS, option_fields

    engine = {f.name for s in ENGINE_SECTIONS for f in dataclasses.fields(SECTIONS[s])} - set(PROMPT_ONLY)
    return [n for n, (f, _) in option_fields().items()
            if (n in engine or n in UP_OPTIONS) and f.metadata.get("cli", True)]


def _fleet_opt(help_text: str):
    return Annotated[str, typer.Option("--fleet", "-f", help=help_text, show_default=False)]


_ADDRESS = Annotated[str | None, typer.Option("--ray-address", envvar="RAY_ADDRESS", show_default=False,
                                              help="Ray cluster address (or RAY_ADDRESS).")]
_JSON = Annotated[bool, typer.Option("--json/--no-json", help="One JSON object per worker. (default: off)",
                                     show_default=False, metavar="")]


def _fmt_time(t: float | None) -> str:
    import datetime as dt

    return "-" if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _engine_line(engine: dict) -> str:
    import os

    extra = ", ".join(f"{k}={v}" for k, v in engine.items() if k not in ("backend", "model") and v is not None)
    return f"{engine.get('backend')} {os.path.basename(str(engine.get('model'))) or engine.get('model')}" + (
        f" ({extra})" if extra else "")


def _show(name: str, statuses: list[dict], as_json: bool) -> None:
    import json

    if as_json:
        for st in statuses:
            echo(json.dumps(st, sort_keys=True, default=str))
        return
    if not statuses:
        echo(f"fleet {name}: no workers up")
        return
    echo(f"fleet {name}: {len(statuses)} worker(s), engine {_engine_line(statuses[0]['engine'])}, kept warm "
         f"{statuses[0]['keep_warm_s']:g} s after its last run")
    for st in statuses:
        state = (f"serving {st['lease']['holder'].get('output')} since {_fmt_time(st['lease']['since'])}"
                 if st.get("lease") else f"idle since {_fmt_time(st['idle_since'])}, stops at "
                 f"{_fmt_time(st['expires_at'])}")
        echo(f"  worker {st['index']}: pid {st['pid']}, engine start {st['engine_start_s']:.1f} s, "
             f"{st['runs_served']} run(s) / {st['shards_served']} shard(s) served; {state}")


def up_cmd(**options: Any) -> None:
    """Start a warm fleet: named, detached Ray workers with their engine loaded, kept until --keep-warm idle."""
    import logging

    from pipeline.config import LabelConfig
    from pipeline.execution.fleet import start_fleet
    from pipeline.options import DEFAULT_KEEP_WARM, parse_duration

    config, name, as_json = options.pop("config"), options.pop("fleet"), options.pop("as_json")
    logging.basicConfig(level=logging.WARNING, format="[mcprm] %(message)s")
    given = {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in options.items() if v is not None}
    with user_errors():
        cfg = (LabelConfig.from_file(config, fleet=name, executor="ray", **given) if config
               else LabelConfig.from_dict(dict(given, fleet=name, executor="ray"), source="options"))
        keep = parse_duration(cfg.keep_warm or DEFAULT_KEEP_WARM)  # (0 is refused: a fleet that stops at once)
        statuses = start_fleet(cfg, name, keep)
    _show(name, statuses, as_json)
    if not as_json:
        echo(f"next: mcprm label --ray-address ADDRESS --fleet {name} ...   (the same engine options)")


def status_cmd(fleet: Annotated[str | None, typer.Option("--fleet", "-f", show_default=False,
                                                          help="Only this fleet. (default: every fleet)")] = None,
               ray_address: _ADDRESS = None, as_json: _JSON = False) -> None:
    """List the fleets on a Ray cluster: each worker's engine, pid, lease, idle since and when it stops."""
    from pipeline.config import LabelConfig
    from pipeline.execution.fleet import connect, fleet_names, fleet_status

    with user_errors():
        ray = connect(LabelConfig(ray_address=ray_address))
        names = [fleet] if fleet else list(fleet_names(ray))
        shown = [(n, [st for _, st in fleet_status(ray, n)]) for n in names]
    if not names and not as_json:
        echo("no fleet is up on this Ray cluster (start one: mcprm fleet up --ray-address ADDRESS ...)")
    for n, statuses in shown:
        _show(n, statuses, as_json)


def down_cmd(fleet: Annotated[str | None, typer.Option(
                 "--fleet", "-f", show_default=False,
                 help="The fleet to stop. (default: with no --ray-address, the workers `mcprm label --keep-warm` "
                      "keeps on this machine, and this machine's Ray with them; else the fleet named default)")] = None,
             ray_address: _ADDRESS = None,
             force: Annotated[bool, typer.Option("--force/--no-force", show_default=False, metavar="",
                                                 help="Stop it even while runs use it (they fail; rerunning "
                                                      "resumes). (default: off)")] = False) -> None:
    """Stop a fleet's workers now (an idle fleet also stops itself after its --keep-warm)."""
    from pipeline.config import LabelConfig
    from pipeline.execution.fleet import connect, stop_fleet

    if fleet is None and not ray_address:  # (RAY_ADDRESS fills ray_address: a cluster's fleet is meant then)
        from pipeline.execution.fleet import stop_local

        with user_errors():
            got = stop_local(force=force)
        echo("no warm workers are kept on this machine (nothing to stop)" if got is None else
             f"this machine's warm workers: stopped {got[0]} worker(s); this machine's Ray for them: {got[1]}")
        return
    fleet = fleet or "default"
    with user_errors():
        n = stop_fleet(connect(LabelConfig(ray_address=ray_address)), fleet, force=force)
    echo(f"fleet {fleet}: stopped {n} worker(s)" if n else f"fleet {fleet}: no workers were up")


def _up_signature() -> inspect.Signature:
    from cli.label import CLI_ONLY, option_param
    from pipeline.config import option_fields

    fields = option_fields()
    params = [option_param(n, *fields[n]) for n in _up_names()]
    params.insert(0, inspect.Parameter("fleet", inspect.Parameter.KEYWORD_ONLY, default="default", annotation=(
        _fleet_opt("The fleet's name (its workers are the Ray actors fleet/NAME/i in namespace mcprm). "
                   "(default: default)"))))
    params.insert(1, CLI_ONLY[0])  # --config: the run file label uses (its other options are ignored here)
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=_JSON))
    return inspect.Signature(params)


up_cmd.__signature__ = _up_signature()  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    fleet_app = typer.Typer(cls=McprmGroup, no_args_is_help=True, add_completion=False,
                            help="A warm fleet of rollout workers on a running Ray cluster, kept between runs "
                                 "(mcprm label --fleet NAME borrows it: no engine start).")
    fleet_app.command("up", cls=HelpCommand)(up_cmd)
    fleet_app.command("status", cls=HelpCommand)(status_cmd)
    fleet_app.command("down", cls=HelpCommand)(down_cmd)
    app.add_typer(fleet_app, name="fleet")
