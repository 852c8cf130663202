"""A judge run: its settings (:class:`JudgeSettings`) and :func:`judge_corpus` (:mod:`pipeline.judge` says what a
judge run does and where its judgments live)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.judge.reply import (
    CRITIQUE_TEMPLATE,
    TOO_LONG,
    critique_prompt,
    majority,
    parse_reply,
)
from pipeline.judge.store import (
    JUDGE_META,
    JUDGE_SCHEMA_VERSION,
    JudgeError,
    check_judge_id,
    judge_schema,
    judge_summary,
    judge_url,
    key64,
    load_part,
    open_store,
    part_names,
)

log = logging.getLogger("mcprm")


# ------------------------------------------------------------------------------------------------ settings
@dataclass
class JudgeSettings:
    """Who judges and how (``mcprm judge``'s options)."""

    model: str
    backend: str = "openai"
    tokenizer: str | None = None
    prompt_format: str = "auto"  # auto | chat | plain
    template: str = CRITIQUE_TEMPLATE
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 1024
    samples: int = 1
    seed: int = 0

    def problems(self) -> list[str]:
        out = []
        if not self.model:
            out.append("--model is required: the judge model (openai: the server's model name)")
        if self.prompt_format not in ("auto", "chat", "plain"):
            out.append(f"--prompt-format must be auto, chat or plain, got {self.prompt_format!r}")
        for ph in ("{problem}", "{tagged_response}"):
            if self.template.count(ph) != 1:
                out.append(f"the judge prompt template must contain {ph} exactly once")
        if self.temperature < 0:
            out.append(f"--temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            out.append(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            out.append(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.samples < 1:
            out.append(f"--samples must be at least 1, got {self.samples}")
        if self.samples > 1 and self.temperature == 0:
            out.append("--samples > 1 needs a --temperature above 0 (greedy samples are all the same)")
        return out


def resolve_format(s: JudgeSettings):
    """The :class:`rollouts.PromptFormat` the judge prompt goes through: ``chat`` with the judge tokenizer's chat
    template (a backend with a local model: ``--tokenizer`` or the model's; a server: only with ``--tokenizer``), ``plain`` otherwise
    (``auto``), or what ``--prompt-format`` says."""
    from rollouts.prompts import make_prompt_format
    from rollouts.registry import BACKENDS

    spec = BACKENDS.get(s.backend)  # an unknown name is refused where the backend is built (backend_options)
    tok = s.tokenizer or (s.model if spec is not None and spec.local_model else None)
    if s.prompt_format == "plain" or (s.prompt_format == "auto" and tok is None):
        return make_prompt_format("plain", template="{problem}\n\n", separator="\n")
    if s.prompt_format == "chat" and tok is None:
        raise JudgeError(f"--prompt-format chat with --backend {s.backend} needs --tokenizer (the judge model's "
                         "tokenizer, for its chat template)")
    try:
        return make_prompt_format("chat", tok)
    except ValueError as e:  # no chat template
        if s.prompt_format == "chat":
            raise JudgeError(str(e)) from None
        return make_prompt_format("plain", template="{problem}\n\n", separator="\n")


def identity(s: JudgeSettings, fmt) -> dict:
    """What changes a judge's answers (hashed into the judge id): model, prompt, format, sampling, seed."""
    f = fmt.to_dict()
    f.pop("source", None)
    return {"model": s.model, "template": s.template, "prompt_format": f, "temperature": s.temperature,
            "top_p": s.top_p, "max_new_tokens": s.max_new_tokens, "samples": s.samples, "seed": s.seed}


def identity_hash(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def default_judge_id(model: str, ident_hash: str) -> str:
    name = posixpath.basename(model.rstrip("/")) or "judge"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "judge"
    return f"{name[:48]}-{ident_hash[:8]}"


# ------------------------------------------------------------------------------------------------ judging
@dataclass
class JudgeResult:
    output: str
    judge_id: str
    version: int
    judged: int  # solutions judged by this run
    already: int  # solutions an earlier run had judged
    parts: int  # parts written by this run
    repaired: int  # damaged parts removed (their rows judged again)
    generated_tokens: int
    statuses: dict[str, int] = field(default_factory=dict)  # this run's judgments by status
    summary: dict = field(default_factory=dict)  # judge_summary() after the run


def _seed(seed: int, key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def _sampling(s: JudgeSettings):
    from rollouts.base import SamplingConfig

    # temperature 0 is greedy on every backend (rollouts.hf decodes by argmax)
    return SamplingConfig(temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens)


def backend_options(s: JudgeSettings, **options: Any):
    """(spec, options) of the judge's rollout backend, checked (``options``: the backend's option fields, e.g.
    base_url, device, tensor_parallel_size, max_model_len; others are ignored). Raises JudgeError."""
    import dataclasses

    from rollouts.registry import backend_spec

    try:
        spec = backend_spec(s.backend)
    except ValueError as e:
        raise JudgeError(str(e)) from None
    names = {f.name for f in dataclasses.fields(spec.options)}
    opts = spec.options(**{k: v for k, v in options.items() if k in names and v is not None})
    bad = opts.problems(True)
    if bad:
        raise JudgeError("; ".join(bad))
    return spec, opts


def build_backend(s: JudgeSettings, **options: Any):
    """The rollout backend for the judge, through the registry (see :func:`backend_options`)."""
    from rollouts.registry import ModelRef

    spec, opts = backend_options(s, **options)
    return spec.build(ModelRef(s.model, s.tokenizer, options.get("dtype"), s.seed), opts)


def judge_corpus(url: str, settings: JudgeSettings, backend_factory: Callable[[], Any], *,
                 judge_id: str | None = None, version: int | None = None, batch_rows: int = 256,
                 limit: int | None = None, on_part: Callable[[int, int], None] | None = None,
                 context_tokens: int | None = None, count_tokens: Callable[[str], int] | None = None) -> JudgeResult:
    """Judge every solution of corpus ``url`` (``version``, default current) that ``judge_id`` has not judged yet,
    writing one checksummed part per ``batch_rows`` solutions (see the module docstring). ``backend_factory`` is
    called only when there is something to judge. ``limit``: judge at most this many solutions in this run.

    A prompt of ``context_tokens`` tokens or more (counted by ``count_tokens``; by default the backend's own
    ``max_positions`` and ``tokenizer`` where it has them, as the hf backend does) is not sent: its judgment is
    stored as ``too_long`` (null), so one long solution does not stop the run."""
    from pipeline.corpus import iter_corpus, open_manifest
    from pipeline.faults import fault_point
    from pipeline.storage.lock import OutputLock
    from pipeline.storage.store import sidecar_rel

    bad = settings.problems()
    if batch_rows < 1:
        bad.append(f"--batch-size must be at least 1, got {batch_rows}")
    if limit is not None and limit < 0:
        bad.append(f"--limit must be >= 0, got {limit}")
    if bad:
        raise JudgeError("; ".join(bad))
    _, manifest = open_manifest(url, version)  # no corpus: CorpusError, before anything is written
    v = manifest["version"]
    fmt = resolve_format(settings)
    ident = identity(settings, fmt)
    ihash = identity_hash(ident)
    jid = check_judge_id(judge_id) if judge_id else default_judge_id(settings.model, ihash)
    jstore = open_store(judge_url(url, jid))
    meta = {"format": "mcprm-judge", "schema_version": JUDGE_SCHEMA_VERSION, "judge_id": jid, "identity": ihash,
            "model": settings.model, "backend": settings.backend, "tokenizer": settings.tokenizer,
            "prompt_format": fmt.kind, "prompt_hash": hashlib.sha256(settings.template.encode()).hexdigest()[:16],
            "settings": ident, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sampling = _sampling(settings)
    statuses: Counter = Counter()
    judged = parts = repaired = tokens = 0
    backend = None
    with OutputLock(jstore) as lock:
        old = jstore.read_json(JUDGE_META)  # written with the first part: a run that judged nothing leaves none
        if old is None and part_names(jstore):
            raise JudgeError(f"{judge_url(url, jid)} has judge parts but no {JUDGE_META} (deleted?): which judge "
                             "wrote them is unknown; move the folder away or use another --judge-id")
        if old is not None and old.get("identity") != ihash:
            was, now = old.get("settings") or {}, json.loads(json.dumps(ident))
            diff = ", ".join(f"{k} {was.get(k)!r} there, {now[k]!r} now" if k != "template" else "prompt template"
                             for k in now if was.get(k) != now[k]) or "its identity"
            raise JudgeError(f"judge {jid!r} at {judge_url(url, jid)} holds the judgments of another judge (it differs "
                             f"in: {diff}); use another --judge-id, or leave it out for a judge id made from the "
                             "settings")
        for rel in jstore.fs.ls(jstore.root, detail=False):  # leftovers of killed writes (we hold the lock)
            if ".tmp-" in posixpath.basename(rel):
                jstore.delete(posixpath.basename(rel))
        done: set[int] = set()
        existing = part_names(jstore)
        for _, name in existing:
            try:
                t = load_part(jstore, name, ["key"])
            except JudgeError as e:
                log.warning("%s: judging its rows again", e)
                jstore.delete(name)
                jstore.delete(sidecar_rel(name))
                repaired += 1
                continue
            done.update(key64(k) for k in t.column("key").to_pylist())
        already = len(done)
        next_part = (existing[-1][0] + 1) if existing else 0
        sidecars = [n for n in jstore.fs.ls(jstore.root, detail=False) if n.endswith(".sum.json")]
        for n in sidecars:  # an orphan sidecar (killed before its part) must not be reused with other content
            m = re.fullmatch(r"part-(\d{5,})\.sum\.json", posixpath.basename(n))
            if m:
                next_part = max(next_part, int(m.group(1)) + 1)

        def flush(batch: list[dict]) -> None:
            nonlocal backend, judged, parts, tokens, next_part
            if backend is None:
                backend = backend_factory()
                fit.extend(_length_check(backend, context_tokens, count_tokens))
            from rollouts.base import GenRequest

            prompts = [fmt.header(critique_prompt(r["problem"], r["steps"], settings.template)) for r in batch]
            sent = [i for i, p in enumerate(prompts) if not fit or fit[1](p) < fit[0]]
            outs: list = [None] * len(batch)
            reqs = [GenRequest(prompts[i], n=settings.samples, seed=_seed(settings.seed, batch[i]["key"]),
                               group=batch[i]["key"]) for i in sent]
            try:
                got = backend.generate(reqs, sampling) if reqs else []
            except Exception as e:  # a server error after its retries, an engine failure
                raise JudgeError(f"the judge backend failed ({type(e).__name__}: {e}); the {already + judged:,} judgments "
                                 "written before are kept: rerun the same command to continue") from e
            for i, comps in zip(sent, got, strict=True):
                outs[i] = comps
            rows = []
            for r, comps in zip(batch, outs, strict=True):
                n = len(r["steps"])
                parsed = [parse_reply(c.text, n) for c in comps or ()]
                if comps is None:
                    idx, status, comps = None, TOO_LONG, []
                elif len(parsed) == 1:
                    idx, status = parsed[0]
                else:
                    idx, status = majority([p[0] for p in parsed])
                statuses[status] += 1
                gen = sum(int(c.num_tokens) for c in comps)
                tokens += gen
                rows.append({"key": r["key"], "id": r["id"], "corpus_version": v, "n_steps": n,
                             "judge_first_error": idx, "status": status, "votes": [p[0] for p in parsed],
                             "replies": [c.text for c in comps], "mc_first_error": r["first_error"],
                             "generated_tokens": gen})
            if not jstore.exists(JUDGE_META):
                jstore.create_json(JUDGE_META, meta)
            _write_part(jstore, f"part-{next_part:05d}.parquet", rows)
            lock.check()
            next_part += 1
            parts += 1
            judged += len(rows)
            if on_part is not None:
                on_part(judged, parts)
            fault_point("judge-part-written", jstore.uri(f"part-{next_part - 1:05d}.parquet"))

        fit: list = []  # (context, count) once the backend is built, when a length check is possible
        batch: list[dict] = []
        try:
            for b in iter_corpus(url, v, ["key", "id", "problem", "steps", "first_error"]):
                for r in b.to_pylist():
                    if limit is not None and judged + len(batch) >= limit:
                        break
                    k = key64(r["key"])
                    if k in done:
                        continue
                    done.add(k)
                    batch.append(r)
                    if len(batch) >= batch_rows:
                        flush(batch)
                        batch = []
            if batch:
                flush(batch)
        finally:
            if backend is not None:
                backend.close()
    res = JudgeResult(url, jid, v, judged, already, parts, repaired, tokens, dict(statuses))
    res.summary = judge_summary(url, jid, v)
    return res


def _length_check(backend, context: int | None, count: Callable[[str], int] | None) -> list:
    """[context, count] for the prompt-length check, or [] when the context or a token counter is unknown."""
    context = context or getattr(backend, "max_positions", None)
    tok = getattr(backend, "tokenizer", None)
    if count is None and tok is not None:
        def count(p: str) -> int:
            return len(tok(p, add_special_tokens=False)["input_ids"]) + 1  # + a BOS the backend may add

    return [int(context), count] if context and count is not None else []


def _write_part(jstore, name: str, rows: list[dict]) -> None:
    """One part, atomically: its checksum sidecar first, then the part (never over an existing part)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.storage.store import digest, sidecar_rel

    table = pa.Table.from_pylist(rows, schema=judge_schema())
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    data = buf.getvalue()
    jstore.write_json(sidecar_rel(name), dict(digest(data), rows=table.num_rows))
    try:
        jstore.create_bytes(name, data)
    except FileExistsError:
        raise JudgeError(f"judge part {jstore.uri(name)} already exists: another judge run wrote it; nothing of "
                         "this batch was written, rerun the same command") from None
