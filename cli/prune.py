"""``mcprm prune OUT``: remove old corpus versions and shards no kept version uses."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import Corpus, echo, user_errors


def register(app: typer.Typer) -> None:
    app.command("prune")(prune_cmd)


def prune_cmd(
    output: Corpus,
    keep: Annotated[int, typer.Option(help="How many latest versions stay readable.")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
) -> None:
    """Remove old versions' manifests and the shard files only they used (readers of kept versions are safe)."""
    from pipeline.storage.prune import prune

    with user_errors(extra=(ValueError,)):
        res = prune(output, keep, dry_run)
    verb = "would remove" if dry_run else "removed"
    echo(f"kept versions {res.kept_versions}; {verb} versions {res.removed_versions} and {len(res.removed_files)} files")
    for f in res.removed_files:
        echo(f"  {f}")
