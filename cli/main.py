"""The ``mcprm`` command line: one module per command group, each registering itself on ``app``."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="mcprm",
    help="Process Reward Model training data, Math-Shepherd style: K rollouts per step prefix, graded, "
    "written as Parquet shards.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines ``register(app)``. Heavy imports stay inside the command bodies.
for _name in ("label", "generate", "grade", "stats", "evaluate", "prune", "export", "report", "plan", "verify", "judge"):
    try:
        _mod = importlib.import_module(f"cli.{_name}")
    except ModuleNotFoundError as _e:  # a command group not built yet
        if _e.name != f"cli.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
