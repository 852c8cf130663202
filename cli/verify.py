"""``mcprm verify OUT``: check every version's manifest and shards; name each problem and its repair."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, AsJson, Corpus, echo, err, user_errors


class _JudgeProblem:
    """A damaged judge part, reported like a corpus problem."""

    def __init__(self, text: str):
        self.kind, self.text = "judge", text

    def __str__(self) -> str:
        return self.text


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_cmd)


def verify_cmd(
    output: Corpus = CORPUS_DEFAULT,
    quick: Annotated[bool, typer.Option("--quick", help="Check presence and size only (no reading of shards).")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="Restore a missing, unreadable or stale manifest.json "
                                                          "(or a lost current version file) from the newest "
                                                          "intact version, under the output lock.")] = False,
    as_json: AsJson = False,
) -> None:
    """Check every committed version: manifest, every shard's presence, size, sha256, schema and row count, and
    the label invariants (len(labels) == len(steps), mc_correct <= mc_total, ...); and every judge part
    (`mcprm judge`) against its checksum. Exit 1 on any problem."""
    from pipeline.storage.integrity import verify_corpus

    with user_errors():
        problems, summary = verify_corpus(output, full=not quick, repair=repair)
        if not quick:  # the judges' parts (`mcprm judge`) beside the corpus: checksums, no repeated rows
            from pipeline.judge.store import verify_judges

            judge_problems, judge_rows = verify_judges(output)
            summary["judges"] = judge_rows
            problems = list(problems) + [_JudgeProblem(p) for p in judge_problems]
    if as_json:
        print(json.dumps({"ok": not problems, "summary": summary,
                          "problems": [p.__dict__ for p in problems]}, indent=2))
    else:
        for p in problems:
            err(str(p))
        if not problems:
            echo(f"{output}: OK — versions {summary['versions']} (current {summary['current']}), "
                 f"{summary['shards']} shards {'present with the recorded size' if quick else 'verified'}, "
                 f"{summary['rows']:,} rows in the current version")
        else:
            echo(f"{output}: {len(problems)} problem(s); damaged versions: {summary.get('damaged_versions')}")
    if problems:
        raise typer.Exit(1)
