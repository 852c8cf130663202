"""``mcprm report OUT``: a self-contained HTML report of a corpus, with its figures as PNG files."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import echo, err, user_errors


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)


def report_cmd(
    corpus: Annotated[str, typer.Argument(help="Corpus folder (any fsspec URL).")] = "./mcprm-out",
    output: Annotated[str, typer.Option(help="Folder for report.html and the PNG figures.")] = "./mcprm-report",
    reference: Annotated[str | None, typer.Option(help="Add `eval` metrics: 'synthetic' or a ProcessBench/"
                                                       "PRM800K-style reference file.")] = None,
    version: Annotated[int | None, typer.Option(help="A committed version (default: current).")] = None,
) -> None:
    """MC-value distribution, label balance by position, first errors, right-answer-wrong-process, cost, eval."""
    from pipeline.commands.report import build_report
    from pipeline.storage.corpus import CorpusError

    with user_errors():
        try:
            res = build_report(corpus, output, version=version, reference=reference)
        except (CorpusError, ValueError) as e:
            err(str(e))
            raise typer.Exit(1) from None
    echo(f"wrote {res.html} and {len(res.figures)} PNG figures")
