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
    use_answer_key: Annotated[bool, typer.Option(
        "--use-answer-key",
        help="Label with the gold answers too, as Monte Carlo labels are made: the last step by the graded final "
             "answer, and a right answer error-free where the PRM's corpus was labeled so. Off by default: the "
             "labels are the PRM's alone, the same with or without gold answers; a number measured with this "
             "is not the PRM's.")] = False,
    trust_correct: Annotated[bool | None, typer.Option(
        "--trust-correct/--no-trust-correct",
        help="With --use-answer-key: a solution whose final answer is right has no error (default: as the "
             "PRM's training corpus was labeled).")] = None,
    max_length: Annotated[int | None, typer.Option(
        help="Most tokens per solution (default: the PRM's training length); steps past it get no score.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress lines on stderr (at most "
                                           "one every 10 s).")] = True,
) -> None:
    """Score every step of new solutions with a PRM (no rollouts) and write them as a corpus that `eval`,
    `export`, `stats` and `report` read; `prm_score` holds the probabilities."""
    from pipeline.training.score import score

    if device != "cpu":
        from cli.common import free_gpus

        free_gpus("mcprm score")  # a warm vLLM engine kept by `mcprm label --keep-warm` would hold the GPU
    with user_errors(extra=(ValueError,)):
        res = score(prm, input, output, threshold=threshold, batch_size=batch_size, overwrite=overwrite,
                    device=device, problem_field=problem_field, steps_field=steps_field,
                    answer_field=answer_field, id_field=id_field, use_answer_key=use_answer_key,
                    trust_correct=trust_correct, max_length=max_length, progress=progress)
    echo(f"{res.output} (version {res.version}): {res.solutions:,} solutions, {res.steps:,} steps scored in "
         f"{res.scoring_seconds:.1f} s; {res.with_error:,} with a first error at threshold {res.threshold:.2f}"
         + (" (labels use the answer key: not the PRM's alone)" if res.use_answer_key else " (the PRM's alone)"))
    if res.cut_steps:
        import sys

        print(f"warning: {res.cut_solutions:,} solutions are longer than {res.max_length} tokens: their last "
              f"{res.cut_steps:,} steps have no score and no label, so a first error there is not found and "
              "best-of-N ranks them on their early steps; pass --max-length to score them whole",
              file=sys.stderr, flush=True)
