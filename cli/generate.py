"""``mcprm generate``: sample solutions for problems (so a user can start from problems alone)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import echo, preflight, user_errors
from pipeline.config import option_default  # the defaults, declared once there
from pipeline.options import BACKENDS, PROMPT_FORMATS


def register(app: typer.Typer) -> None:
    app.command("generate")(generate_cmd)


_loaded = [0.0]  # seconds the model load took, said by the first call (done 0)


def progress_line(done: int, total: int, solutions: int, tokens: int, seconds: float) -> None:
    """One line on stderr after each batch of problems (a 300-problem run was otherwise silent for minutes):
    problems done, solutions kept, tokens, time, and the time left at the pace of the batches so far (every
    batch has as many problems and samples, so the pace is known from the first)."""
    import sys

    from pipeline.execution.progress import duration_text

    if done == 0:
        _loaded[0] = seconds  # the pace is the batches' own, after the model load
        print(f"[mcprm] generate: model loaded in {seconds:.0f} s; sampling {total:,} problems", file=sys.stderr,
              flush=True)
        return
    pace = max(0.0, seconds - _loaded[0]) / done
    left = "" if done >= total else f", about {duration_text(pace * (total - done))} left"
    print(f"[mcprm] generate: {done:,}/{total:,} problems, {solutions:,} solutions, {tokens:,} tokens in "
          f"{seconds:.0f} s{left}", file=sys.stderr, flush=True)


def generate_cmd(
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="Problems (JSONL/Parquet, any fsspec URL). Default: the bundled problems.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Solutions JSONL to write.")] = "./solutions.jsonl",
    n: Annotated[int, typer.Option("--n", help="Solutions per problem.")] = 4,
    model: Annotated[str | None, typer.Option(help="Model folder or name (openai: the server's model name). Default: the bundled model.")] = None,
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer folder or name, if not the model's.")] = None,
    backend: Annotated[str, typer.Option(help=" | ".join(BACKENDS))] = option_default("backend"),
    base_url: Annotated[str | None, typer.Option(help="openai backend: server URL, e.g. http://127.0.0.1:8000/v1.")] = None,
    device: Annotated[str, typer.Option(help="hf backend: cpu | cuda.", show_default=True)] = option_default("device"),
    prompt_format: Annotated[str, typer.Option(help=" | ".join(PROMPT_FORMATS))] = option_default("prompt_format"),
    prompt_template: Annotated[str | None, typer.Option(help="plain format template with {problem}.")] = None,
    step_separator: Annotated[str | None, typer.Option(help="Text between steps (plain: newline, chat: blank line).")] = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = option_default("temperature"),
    top_p: Annotated[float, typer.Option(help="Nucleus sampling top-p.")] = option_default("top_p"),
    max_new_tokens: Annotated[int, typer.Option(help="Most tokens per solution.")] = option_default("max_new_tokens"),
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = option_default("seed"),
    problem_field: Annotated[str, typer.Option(help="Input field holding the problem.")] = option_default("problem_field"),
    answer_field: Annotated[str, typer.Option(help="Input field holding the gold answer.")] = option_default("answer_field"),
    id_field: Annotated[str, typer.Option(help="Input field holding the problem id.")] = option_default("id_field"),
    engines_per_gpu: Annotated[int, typer.Option(help="vllm: engines sharing the GPU, each with 1/N of its memory share; 0: sized from the model and the GPU.")] = option_default("engines_per_gpu"),
    show_progress: Annotated[bool, typer.Option("--progress/--no-progress", help="A progress line on stderr after "
                                                "each batch of problems.")] = True,
) -> None:
    """Sample N independent solutions per problem, cut into steps, written in the format `label` reads."""
    from pipeline.commands.generate import generate
    from pipeline.config import LabelConfig

    with user_errors():
        cfg = LabelConfig(input=list(input or []), output=output, model=model or "", tokenizer=tokenizer,
                          backend=backend, base_url=base_url, device=device, prompt_format=prompt_format,
                          prompt_template=prompt_template, step_separator=step_separator, temperature=temperature,
                          top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, engines_per_gpu=engines_per_gpu)
        preflight(cfg, output=False)  # a device this machine lacks: said before the model loads
        if cfg.worker_gpus > 0 or device == "cuda":
            from cli.common import free_gpus

            free_gpus("mcprm generate")  # a warm engine kept by `mcprm label` holds the GPU
        res = generate(cfg, n=n, problem_field=problem_field, answer_field=answer_field, id_field=id_field,
                       on_batch=progress_line if show_progress else None)
    echo(f"{res.output}: {res.solutions} solutions for {res.problems} problems ({res.empty} empty samples "
         f"dropped), {res.generated_tokens:,} tokens in {res.seconds:.1f} s")
