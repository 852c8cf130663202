"""The ``mcprm`` command line: one module per command group, each registering itself on ``app``."""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperCommand

from cli.help import HelpCommand, McprmGroup

app = typer.Typer(
    name="mcprm",
    cls=McprmGroup,  # usage errors begin "error:" as every other error (cli/help.py)
    help="Process Reward Model training data, Math-Shepherd style: K rollouts per step prefix, graded, "
    "written as Parquet shards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines ``register(app)``. Heavy imports stay inside the command bodies.
for _name in ("label", "generate", "grade", "stats", "evaluate", "prune", "export", "report", "plan", "verify", "judge",
              "train", "score", "bestofn", "fleet"):
    try:
        _mod = importlib.import_module(f"cli.{_name}")
    except ModuleNotFoundError as _e:  # a command group not built yet
        if _e.name != f"cli.{_name}":
            raise
        continue
    _mod.register(app)
for _info in app.registered_commands:  # every command's --help reads at 80 columns (cli/help.py)
    if _info.cls in (None, TyperCommand):  # not given: typer's default
        _info.cls = HelpCommand


def main() -> None:  # pragma: no cover
    app(prog_name="mcprm")  # `python -m cli.main` too: messages name the command a user types


if __name__ == "__main__":  # pragma: no cover
    main()
