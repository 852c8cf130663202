"""``mcprm judge OUT --backend openai|vllm|hf --model M``: an LLM judge's first-error index beside MC's.

See :mod:`pipeline.judge` for the prompt, the parser and the storage (``OUT/judge/<judge-id>/``).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, AsJson, Corpus, Version, echo, err, print_table, user_errors


def register(app: typer.Typer) -> None:
    app.command("judge")(judge_cmd)


def judge_cmd(
    corpus: Corpus = CORPUS_DEFAULT,
    backend: Annotated[str, typer.Option(help="hf | vllm | sglang | openai")] = "openai",
    model: Annotated[str | None, typer.Option(help="Judge model (folder or hub name; openai: the server's model "
                                                   "name).")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai backend: server URL, e.g. http://127.0.0.1:8000/v1 "
                                                      "(key: OPENAI_API_KEY).")] = None,
    tokenizer: Annotated[str | None, typer.Option(help="The judge's tokenizer (for its chat template), if not the "
                                                       "model's; openai: needed for the chat format.")] = None,
    judge_id: Annotated[str | None, typer.Option(help="The judge's folder under OUT/judge/ (default: model name "
                                                      "+ hash of model, prompt and sampling).")] = None,
    prompt_format: Annotated[str, typer.Option(help="auto (chat when the tokenizer has a chat template) | chat | "
                                                    "plain")] = "auto",
    prompt_template: Annotated[str | None, typer.Option(help="A file with the judge prompt, containing {problem} "
                                                             "and {tagged_response} (default: ProcessBench's).")] = None,
    temperature: Annotated[float, typer.Option(help="0: greedy (deterministic).")] = 0.0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling top-p.")] = 1.0,
    max_new_tokens: Annotated[int, typer.Option(help="Most tokens per judgment.")] = 1024,
    samples: Annotated[int, typer.Option(help="Judgments per solution (needs --temperature > 0); the most "
                                              "frequent index wins, a tie is null.")] = 1,
    seed: Annotated[int, typer.Option(help="Sampling seed (per solution: derived from it and the solution).")] = 0,
    batch_size: Annotated[int, typer.Option(help="Solutions per written part (what a killed run loses at "
                                                 "most).")] = 256,
    limit: Annotated[int | None, typer.Option(help="Judge at most this many solutions in this run.")] = None,
    version: Version = None,
    device: Annotated[str, typer.Option(help="hf backend: cpu | cuda.")] = "cpu",
    dtype: Annotated[str | None, typer.Option(help="hf / vllm: model dtype.")] = None,
    tensor_parallel_size: Annotated[int, typer.Option(help="vllm: GPUs per model replica.")] = 1,
    max_model_len: Annotated[int | None, typer.Option(help="The judge's context in tokens (vllm: the engine's "
                                                           "limit): longer prompts are not sent but stored as "
                                                           "too_long (counted with --tokenizer or the model's; hf: "
                                                           "the model's own context by default).")] = None,
    summary: Annotated[bool, typer.Option("--summary", help="Only show the agreement of the judges already "
                                                            "run (no judging).")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Only check every judge part against its checksum.")] = False,
    as_json: AsJson = False,
) -> None:
    """Ask a judge model where each solution's first error is (ProcessBench prompt), store its index beside MC's
    under OUT/judge/<judge-id>/, and show how often they agree. A killed run resumes where it stopped.
    `mcprm export --consensus JUDGE-ID` then keeps the rows where judge and MC agree."""
    import dataclasses

    from pipeline.judge import run as J
    from pipeline.judge import store as JS

    if verify:
        with user_errors():
            from pipeline.corpus import open_manifest

            open_manifest(corpus)  # not a corpus: its error
            problems, rows = JS.verify_judges(corpus)
        if as_json:
            print(json.dumps({"ok": not problems, "rows": rows, "problems": problems}, indent=2))
        else:
            for p in problems:
                err(p)
            echo(f"{corpus}: judges {rows or '{}'}: " + ("OK" if not problems else f"{len(problems)} problem(s)"))
        if problems:
            raise typer.Exit(1)
        return
    if summary:
        with user_errors():
            sums = [JS.judge_summary(corpus, judge_id, version)] if judge_id else JS.judge_summaries(corpus, version)
            if not sums:
                JS.resolve_judge(corpus, None)  # the "no judge results" error
        if as_json:
            print(json.dumps(sums, indent=2))
        else:
            for s in sums:
                _print_summary(s)
        return
    if not model:
        err("--model is required: the judge model (openai: the server's model name)")
        raise typer.Exit(1)
    with user_errors():  # a failed run keeps its parts; JudgeError says to rerun
        template = J.CRITIQUE_TEMPLATE
        if prompt_template:
            from pipeline.storage.fs import open_url

            with open_url(prompt_template, "r", encoding="utf-8") as f:
                template = f.read()
        settings = J.JudgeSettings(model=model, backend=backend, tokenizer=tokenizer, prompt_format=prompt_format,
                                   template=template, temperature=temperature, top_p=top_p,
                                   max_new_tokens=max_new_tokens, samples=samples, seed=seed)
        options = dict(base_url=base_url, device=device, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                       max_model_len=max_model_len)
        spec, _ = J.backend_options(settings, **options)  # an unknown backend, a missing --base-url: said first
        from pipeline.config import ConfigError
        from rollouts.registry import backend_problem

        if why := backend_problem(backend, device):  # a device or GPU this machine lacks, said first
            raise ConfigError(why)

        def make():
            if backend in ("vllm", "sglang") or device == "cuda":
                from cli.common import free_gpus

                free_gpus("mcprm judge")  # a warm engine kept by `mcprm label` holds the GPU
            return J.build_backend(settings, **options)

        def progress(judged: int, parts: int) -> None:
            if not as_json:
                echo(f"  judged {judged:,} solutions ({parts} part(s) written)")

        count = None
        tok_path = tokenizer or (model if spec.local_model else None)  # a server's model has no local tokenizer
        if max_model_len and tok_path:
            from rollouts.base import require

            tok = require("transformers", "pip install transformers").AutoTokenizer.from_pretrained(tok_path)

            def count(p: str) -> int:
                return len(tok(p, add_special_tokens=False)["input_ids"]) + 1

        res = J.judge_corpus(corpus, settings, make, judge_id=judge_id, version=version, batch_rows=batch_size,
                             limit=limit, on_part=progress, context_tokens=max_model_len, count_tokens=count)
    if as_json:
        print(json.dumps(dataclasses.asdict(res), indent=2))
        return
    st = ", ".join(f"{k} {v:,}" for k, v in sorted(res.statuses.items())) or "-"
    echo(f"judge {res.judge_id}: judged {res.judged:,} solutions of version {res.version} in {res.parts} part(s) "
         f"({res.already:,} judged before; replies: {st}; {res.generated_tokens:,} tokens)"
         + (f"; {res.repaired} damaged part(s) judged again" if res.repaired else ""))
    _print_summary(res.summary)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _print_summary(s: dict) -> None:
    d = s["disagreement"]
    print_table(f"judge {s['judge_id']} ({s['model']}) vs MC, version {s['version']}", [
        ("rows / judged / not judged", f"{s['rows']:,} / {s['judged']:,} / {s['not_judged']:,}"),
        ("agree (of them both 'no error')", f"{s['agree']:,} ({s['agree_no_error']:,})"),
        ("disagree", f"{s['disagree']:,}"),
        ("  judge earlier / later / says no error / finds one where MC has none",
         f"{d['judge_earlier']:,} / {d['judge_later']:,} / {d['judge_no_error_mc_error']:,} / "
         f"{d['judge_error_mc_no_error']:,}"),
        ("unparseable replies (kept as null)", f"{s['unparseable']:,}"),
        ("prompts too long for the judge (null, not sent)", f"{s.get('too_long', 0):,}"),
        ("agreement rate (agree / (agree + disagree))", _pct(s["agreement_rate"])),
        ("agreement of all judged (null counts as no)", _pct(s["agreement_rate_of_judged"])),
    ])
