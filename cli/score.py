"""``mcprm score PRM --input FILE --output OUT``: per-step PRM probabilities as a corpus (pipeline.training.score)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import echo, user_errors


def register(app: typer.Typer) -> None:
    app.command("score")(score_cmd)


def score_cmd(
    prm: Annotated[str, typer.Argument(help="PRM folder written by `mcprm train`.")],
    input: Annotated[list[str], typer.Option("--input", "-i", help="Solutions (JSONL/Parquet, any fsspec URL) with "
                                                                   "problem and steps; answer and id optional.")],
    output: Annotated[str, typer.Option("--output", "-o", help="Scored corpus folder to write.")] = "./mcprm-scored",
    threshold: Annotated[float | None, typer.Option(
        help="P(good) below which a step is an error (default: the PRM's, chosen on its validation "
             "problems).")] = None,
    batch_size: Annotated[int, typer.Option(help="Solutions per forward pass.")] = 32,
    device: Annotated[str | None, typer.Option(help="cpu | cuda (default: cuda when there is one).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Write a new version over an earlier scored "
                                                                "corpus in --output.")] = False,
    problem_field: Annotated[str, typer.Option(help="Input field holding the problem.")] = "problem",
    steps_field: Annotated[str, typer.Option(help="Input field holding the list of steps.")] = "steps",
    answer_field: Annotated[str, typer.Option(help="Input field holding the gold answer (optional).")] = "answer",
    id_field: Annotated[str, typer.Option(help="Input field holding the solution id (optional).")] = "id",
    trust_correct: Annotated[bool | None, typer.Option(
        "--trust-correct/--no-trust-correct",
        help="With a gold answer: a solution whose final answer is right has no error (default: as the PRM's "
             "training corpus was labeled; on for binary-search).")] = None,
) -> None:
    """Score every step of new solutions with a PRM (no rollouts) and write them as a corpus that `eval`,
    `export`, `stats` and `report` read; `prm_score` holds the probabilities."""
    from pipeline.training.score import score

    if device != "cpu":
        from cli.common import free_gpus

        free_gpus("mcprm score")  # issue 29: a warm vLLM engine kept by `mcprm label` holds the GPU
    with user_errors(extra=(ValueError,)):
        res = score(prm, input, output, threshold=threshold, batch_size=batch_size, overwrite=overwrite,
                    device=device, problem_field=problem_field, steps_field=steps_field,
                    answer_field=answer_field, id_field=id_field, trust_correct=trust_correct)
    echo(f"{res.output} (version {res.version}): {res.solutions:,} solutions, {res.steps:,} steps scored in "
         f"{res.scoring_seconds:.1f} s; {res.with_error:,} with a first error at threshold {res.threshold:.2f}")
