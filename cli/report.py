"""``mcprm report OUT``: a self-contained HTML report of a corpus, with its figures as PNG files."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, Corpus, Version, echo, repeat_warnings, user_errors


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)


def report_cmd(
    corpus: Corpus = CORPUS_DEFAULT,
    output: Annotated[str, typer.Option(help="Folder for report.html and the PNG figures.")] = "./mcprm-report",
    reference: Annotated[str | None, typer.Option(help="Add `eval` metrics: 'synthetic' or a ProcessBench/"
                                                       "PRM800K-style reference file.")] = None,
    version: Version = None,
) -> None:
    """MC-value distribution, label balance by position, first errors, right-answer-wrong-process, cost, eval."""
    from pipeline.commands.report import build_report

    with user_errors(extra=(ValueError,)):  # a bad reference file names its row
        res = build_report(corpus, output, version=version, reference=reference)
    echo(f"wrote {res.html} and {len(res.figures)} PNG figures")
    repeat_warnings(corpus, version, res.notes)  # on the page too
