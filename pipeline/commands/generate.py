"""``mcprm generate``: sample N solutions per problem from a policy model, in the format ``label`` reads.

Problems come from JSONL/Parquet (any fsspec URL) with a problem and a gold answer (field names mappable).
Each solution is sampled from the prompt format's header (the same prompt ``label`` continues), cut into
steps at the prompt format's step separator, and written as one JSONL row:
``{"id", "problem_id", "problem", "answer", "steps", "finish_reason"}``. Bad problem rows are reported with
file and row before any sampling. The output file is written whole (temporary name, then rename).

A streaming backend (vLLM's ``loop`` or ``async`` engine, several engines per GPU) is never left to drain between
batches: the next batches are submitted while earlier ones are in flight (:func:`stream_batches`), so a batch's
longest solution no longer holds the GPU idle. Rows are written in the problems' order either way, and each
problem's request (prompt, n, seed) is the same as when batches were waited for one by one.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pipeline.config import ConfigError, LabelConfig

# Batches submitted beyond the oldest one still generating: at 64 problems and n=8 a batch is 512 sequences, so 8
# ahead keep ~4,600 in flight, enough for four engines of vLLM's 1,024 on one GPU, while a slow batch holds at
# most 8 finished ones in memory.
BATCHES_AHEAD = 8


@dataclass
class GenerateResult:
    output: str
    problems: int
    solutions: int
    empty: int
    generated_tokens: int
    seconds: float
    torch_threads: int | None = None  # the hf backend on CPU: the threads it ran with (pipeline.config)


def _read_problems(cfg: LabelConfig, problem_field: str, answer_field: str, id_field: str):
    from pipeline.input import InputError, InputSpec, iter_objects

    spec = InputSpec(paths=tuple(cfg.input), problem_field=problem_field, answer_field=answer_field,
                     id_field=id_field, format=cfg.input_format)
    out, bad = [], []
    for raw, d in iter_objects(spec, bad):
        prob, ans = d.get(problem_field), d.get(answer_field)
        if not isinstance(prob, str) or not prob.strip():
            bad.append(f"{raw.where}, field '{problem_field}': missing or not text")
            continue
        if ans is None or (isinstance(ans, str) and not ans.strip()) or isinstance(ans, (bool, list, dict)):
            bad.append(f"{raw.where}, field '{answer_field}': missing gold answer")
            continue
        pid = d.get(id_field)
        pid = str(pid) if pid is not None else hashlib.sha256(prob.encode()).hexdigest()[:16]
        out.append((pid, prob.strip(), str(ans).strip()))
    if bad:
        shown = "\n  ".join(bad[:5])
        raise InputError(f"{len(bad)} bad problem row(s); nothing was sampled:\n  {shown}")
    if not out:
        raise ConfigError(f"no problems in {', '.join(cfg.input)}")
    return out


def stream_batches(backend, batches: Iterable[Sequence], sampling, ahead: int = BATCHES_AHEAD
                   ) -> Iterator[tuple[Sequence, list]]:
    """``(batch, completions)`` for each batch of requests, in the batches' order. A backend with ``submit``
    (``streaming``) has up to ``ahead`` more batches submitted while it generates the oldest; any other is asked
    for one batch at a time. A failed request raises when its batch's turn comes; what is still in flight then is
    the backend's to stop (``close``, which ``generate`` always calls): a submitted request is never cancelled
    behind the engine's back."""
    if not (getattr(backend, "streaming", False) and hasattr(backend, "submit")):
        for b in batches:
            yield b, backend.generate(b, sampling)
        return
    inflight: deque = deque()
    for b in batches:
        inflight.append((b, backend.submit(b, sampling)))
        while len(inflight) > ahead:
            b0, futs = inflight.popleft()
            yield b0, [f.result() for f in futs]
    while inflight:
        b0, futs = inflight.popleft()
        yield b0, [f.result() for f in futs]


def generate(cfg: LabelConfig, n: int = 4, problem_field: str = "problem", answer_field: str = "answer",
             id_field: str = "id", batch_problems: int | None = None, on_batch=None) -> GenerateResult:
    """Sample ``n`` solutions per problem, ``batch_problems`` problems per request batch (a streaming backend has
    several batches in flight: :func:`stream_batches`); ``on_batch(problems done, problems, solutions kept,
    generated tokens, seconds)`` once the model is loaded (0 done) and after each batch is written in order (the
    CLI's progress lines). ``batch_problems`` by default: for a backend that decodes in micro-batches of
    ``max_batch_rows`` sample rows (hf), the problems of one micro-batch, so a progress line comes after each (a
    call of 64 problems x 8 samples on a CPU took minutes before its first line, for no faster decoding); else 64
    (a GPU engine batches a whole call, and streams several)."""
    import time

    from pipeline.execution.shard_worker import build_backend
    from pipeline.labeling.scheduler import derive_seed
    from pipeline.storage.store import CorpusStore
    from rollouts.base import GenRequest

    t0 = time.perf_counter()
    if n < 1:
        raise ConfigError("--n must be at least 1")
    if not cfg.input:
        from pipeline import bundled

        cfg.input = [str(bundled.problems_path())]
    if not cfg.model:
        from pipeline import bundled

        cfg.model = str(bundled.model_dir())
    cfg.validate()
    problems = _read_problems(cfg, problem_field, answer_field, id_field)
    from pipeline.config import cpu_torch_threads

    # the backend's own preparation, as a label worker's (hf on CPU: its torch threads), before it is built
    cfg.backend_spec.prepare_worker(cfg.backend_options, cpu_torch_threads())
    backend = build_backend(cfg)
    if batch_problems is None:
        rows = getattr(backend, "max_batch_rows", None)
        batch_problems = max(1, min(64, rows // n)) if isinstance(rows, int) and rows > 0 else 64
    if on_batch is not None:
        on_batch(0, len(problems), 0, 0, time.perf_counter() - t0)  # the model is loaded: said at once
    fmt = cfg.prompt_builder()
    sep = fmt.separator
    sampling = cfg.sampling_config(fmt)
    lines: list[str] = []
    empty = 0

    def batches():
        for s in range(0, len(problems), batch_problems):
            chunk = problems[s : s + batch_problems]
            yield [GenRequest(fmt.prefix(p, []), n, derive_seed(cfg.seed, pid, -1, 0), pid) for pid, p, _ in chunk]

    done = 0
    try:
        for reqs, outs in stream_batches(backend, batches(), sampling):
            chunk = problems[done : done + len(reqs)]
            done += len(reqs)
            for (pid, prob, ans), comps in zip(chunk, outs, strict=True):
                for j, c in enumerate(comps):
                    steps = [x.strip() for x in c.text.split(sep) if x.strip()]
                    if not steps:
                        empty += 1
                        continue
                    lines.append(json.dumps({"id": f"{pid}-{j}", "problem_id": pid, "problem": prob, "answer": ans,
                                             "steps": steps, "finish_reason": c.finish_reason}, ensure_ascii=False))
            if on_batch is not None:
                on_batch(done, len(problems), len(lines), backend.stats.generated_tokens, time.perf_counter() - t0)
        tokens = backend.stats.generated_tokens
    finally:
        backend.close()
    store, name = CorpusStore.for_file(cfg.output)
    store.write_bytes(name, ("\n".join(lines) + "\n").encode())
    threads = None
    if cfg.backend == "hf" and cfg.device == "cpu":
        import torch

        threads = torch.get_num_threads()
    return GenerateResult(cfg.output, len(problems), len(lines), empty, tokens, time.perf_counter() - t0, threads)
