"""``score()``: per-step PRM probabilities for new solutions (no rollouts), written as an mcprm corpus.

Input: JSONL/Parquet rows (any fsspec URL) with ``problem`` and ``steps`` (a list of strings), an optional ``id``
and an optional gold ``answer`` (field names configurable) — ``data/sample.jsonl`` and ``mcprm generate``'s output
as they are. Each solution is read by the PRM in one forward pass (:mod:`pipeline.training.collate` layout,
batched, longest first); ``P(good)`` at each step's separator is its score.

Output: a corpus with the label corpus's schema (``mcprm eval``, ``stats``, ``export``, ``report`` read it):
``prm_score`` holds the probabilities, ``labels`` are ``prm_score >= threshold`` (the PRM's threshold, chosen on
its validation problems, or ``--threshold``), ``first_error`` the first step below it, ``strategy`` is ``"prm"``,
``k`` 0, the ``mc_*`` counts 0 and ``mc_value`` / ``mc_low`` / ``mc_high`` / ``first_error_confidence`` null: no
Monte Carlo estimate exists. ``solution_correct`` is the solution's own final answer graded against the gold
answer when the row has one (null otherwise): a fact about the solution for ``bestofn`` and ``eval``, never an
input of the labels.

The labels and first errors are the PRM's alone, from the problem and the steps: the same with or without gold
answers in the input. ``use_answer_key`` (``--use-answer-key``) labels the way Monte Carlo labels are made
instead: the last step by the graded answer and, with ``trust_correct``, a right answer error-free; the manifest
records it, and a number measured that way is not the PRM's.

Steps past the PRM's ``max_length`` (or ``--max-length``) have no score and no label; their count is returned and
printed, since a first error among them cannot be found.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graders.config import DEFAULT_TIMEOUT_S
from pipeline.errors import FatalError

log = logging.getLogger("mcprm")

STRATEGY = "prm"


class ScoreError(FatalError, ValueError):
    pass


@dataclass
class LoadedPrm:
    model: object
    tokenizer: object
    fmt: object  # PrmFormat
    sep_id: int
    threshold: float
    path: str
    card: dict
    device: str


def load_prm(path: str, device: str | None = None) -> LoadedPrm:
    """A PRM written by ``mcprm train`` (a folder): model, tokenizer, input layout and threshold."""
    from rollouts.base import require

    torch = require("torch", "pip install torch")
    transformers = require("transformers", "pip install transformers")
    from pipeline.training.card import CARD
    from pipeline.training.collate import CollateError, PrmFormat, separator_id

    p = Path(path)
    if not p.is_dir() or not (p / "config.json").exists():
        if (p / "manifest.json").exists():  # a labeled corpus given where the PRM goes
            raise ScoreError(f"{path} is a labeled corpus, not a PRM folder: train a PRM on it first "
                             f"(`mcprm train {path} --output prm`), then `mcprm score prm --input ...`")
        raise ScoreError(f"{path} is not a PRM folder (no config.json); train one with `mcprm train CORPUS "
                         "--output PRM_DIR` and pass PRM_DIR")
    cfg = json.loads((p / "config.json").read_text())
    prm = cfg.get("mcprm_prm")
    if not prm:
        raise ScoreError(f"{path}/config.json has no 'mcprm_prm' entry: not a PRM written by `mcprm train` (its "
                         "separator and threshold are unknown)")
    card = json.loads((p / CARD).read_text()) if (p / CARD).exists() else {}
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cpu":
        from pipeline.config import pin_cpu_threads

        pin_cpu_threads()
    # the implicit kind in float32: its policy differs from its reference by fine-tuning steps smaller than bf16
    # resolves, and the score sums their log-ratio over every token
    bf16 = dev.startswith("cuda") and torch.cuda.is_bf16_supported() and prm.get("kind", "head") != "implicit"
    dtype = torch.bfloat16 if bf16 else torch.float32
    tok = transformers.AutoTokenizer.from_pretrained(path)
    try:
        fmt = PrmFormat.from_dict(prm["format"])
        sep = separator_id(tok, fmt.separator)
    except CollateError as e:
        raise ScoreError(f"{path}: {e}") from None
    if prm.get("kind", "head") == "implicit":
        from pipeline.training import implicit

        try:
            model = implicit.load(path, prm, sep, dtype, dev)
        except FileNotFoundError as e:
            raise ScoreError(str(e)) from None
    else:
        model = transformers.AutoModelForTokenClassification.from_pretrained(path, dtype=dtype).to(dev).eval()
    return LoadedPrm(model, tok, fmt, sep, float(prm.get("threshold", 0.5)), str(path), card, dev)


LOGITS_BUDGET_BYTES = 8 << 30  # float32 logits one scoring batch may hold (the implicit kind's budget of tokens)


def predict_probs(model, tokenizer, fmt, sep_id: int, items: Sequence[tuple[str, Sequence[str]]],
                  batch_size: int = 32, max_batch_tokens: int = 65_536, on_batch=None) -> list[list[float | None]]:
    """P(step good) for every step of every (problem, steps) item, in order; None for a step cut by
    ``fmt.max_length`` (:func:`cut_steps` counts them). Batched, longest first (so padding is small).
    ``on_batch(done, total)`` after each forward pass (progress)."""
    import torch

    from pipeline.training.collate import CollateError, PieceCache, encode

    pieces = PieceCache(tokenizer)
    encs = []
    for i, (problem, steps) in enumerate(items):
        try:
            encs.append(encode(tokenizer, fmt, sep_id, problem, steps, pieces))
        except CollateError as e:
            raise ScoreError(f"item {i}: {e}") from None
    order = sorted(range(len(encs)), key=lambda i: -len(encs[i].input_ids))
    out: list[list[float | None]] = [[] for _ in encs]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    dev = next(model.parameters()).device
    per_token = getattr(model, "logits_per_token", 0)  # an implicit PRM holds float32 vocab-wide logits per token
    if per_token:
        vocab = model.config.vocab_size
        max_batch_tokens = min(max_batch_tokens, max(1, LOGITS_BUDGET_BYTES // (4 * vocab * per_token)))
    was_training = model.training
    model.eval()
    try:
        pos = 0
        while pos < len(order):
            longest = len(encs[order[pos]].input_ids)
            n = max(1, min(batch_size, max_batch_tokens // max(1, longest)))
            chunk = order[pos: pos + n]
            pos += n
            ids = torch.full((len(chunk), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), longest), dtype=torch.long)
            for r, i in enumerate(chunk):
                e = encs[i]
                ids[r, : len(e.input_ids)] = torch.tensor(e.input_ids)
                mask[r, : len(e.input_ids)] = 1
            extra = {}
            if getattr(model, "wants_response_start", False):  # an implicit PRM (pipeline.training.implicit)
                extra["response_start"] = torch.tensor([encs[i].start for i in chunk], device=dev)
            with torch.no_grad():
                logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), **extra).logits.float()
            probs = torch.softmax(logits, dim=-1)[..., 1].cpu()
            for r, i in enumerate(chunk):
                e = encs[i]
                got = probs[r, e.positions].tolist() if e.positions else []
                n_steps = len(items[i][1])
                out[i] = [float(x) for x in got] + [None] * (n_steps - len(got))
            if on_batch is not None:
                on_batch(pos if pos < len(order) else len(order), len(order))
    finally:
        if was_training:
            model.train()
    return out


def cut_steps(probs: Sequence[Sequence[float | None]]) -> tuple[int, int]:
    """(solutions, steps) left without a score because the PRM's max length cut them."""
    rows = steps = 0
    for p in probs:
        n = sum(1 for x in p if x is None)
        rows += n > 0
        steps += n
    return rows, steps


# ------------------------------------------------------------------ input
@dataclass
class ScoreRow:
    id: str
    problem: str
    steps: list[str]
    answer: str | None
    source: str
    extra: dict


def read_solutions(paths: Sequence[str], problem_field: str = "problem", steps_field: str = "steps",
                   answer_field: str = "answer", id_field: str = "id") -> list[ScoreRow]:
    """The solutions to score, each checked: a non-empty problem, a non-empty list of non-empty text steps; the
    gold answer optional. A bad row stops the run before any scoring, naming file, row and field."""
    from pipeline.input import InputSpec, iter_objects

    spec = InputSpec(paths=tuple(paths), problem_field=problem_field, answer_field=answer_field, id_field=id_field)
    rows: list[ScoreRow] = []
    bad: list[str] = []
    seen: dict[str, str] = {}
    for raw, d in iter_objects(spec, bad):
        prob = d.get(problem_field)
        if not isinstance(prob, str) or not prob.strip():
            bad.append(f"{raw.where}, field '{problem_field}': missing or not text")
            continue
        steps = d.get(steps_field)
        if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
            bad.append(f"{raw.where}, field '{steps_field}': must be a non-empty list of non-empty strings")
            continue
        ans = d.get(answer_field)
        if ans is not None and not isinstance(ans, (str, int, float)) or isinstance(ans, bool):
            bad.append(f"{raw.where}, field '{answer_field}': the gold answer must be text or a number")
            continue
        ans = None if ans is None or (isinstance(ans, str) and not ans.strip()) else str(ans).strip()
        steps = [s.strip() for s in steps]
        rid = d.get(id_field)
        if rid is None:
            from pipeline.solution import content_key

            rid = content_key(prob.strip(), ans or "", steps)
        rid = str(rid)
        if rid in seen:
            bad.append(f"{raw.where}, field '{id_field}': id {rid!r} already used at {seen[rid]}")
            continue
        seen[rid] = raw.where
        extra = {k: d[k] for k in ("problem_id",) if k in d}
        rows.append(ScoreRow(rid, prob.strip(), steps, ans, f"{raw.file}:{raw.row}", extra))
    if bad:
        shown = "\n  ".join(bad[:5])
        more = f"\n  ... and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ScoreError(f"{len(bad)} bad row(s) in {', '.join(paths)}; nothing was scored:\n  {shown}{more}")
    if not rows:
        raise ScoreError(f"no solutions in {', '.join(paths)}; nothing to score")
    return rows


def grade_own_answers(rows: Sequence[ScoreRow], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[bool | None]:
    """Each solution's own final answer against its gold answer (the label pipeline's rule,
    :func:`pipeline.labeling.last_step.own_correct`); None without a gold answer."""
    todo = [i for i, r in enumerate(rows) if r.answer is not None]
    out: list[bool | None] = [None] * len(rows)
    if not todo:
        return out
    from graders import GraderConfig, grade_batch
    from pipeline.labeling.last_step import own_correct

    verdicts = grade_batch([(rows[i].answer, "\n".join(rows[i].steps)) for i in todo],
                           GraderConfig(timeout_s=timeout_s), problems=[rows[i].problem for i in todo])
    for i, v in zip(todo, verdicts, strict=True):
        out[i] = own_correct(v)
    return out


# ------------------------------------------------------------------ output corpus
def labels_from_scores(probs: Sequence[float | None], threshold: float, solution_correct: bool | None = None,
                       trust_correct: bool = False) -> tuple[list[bool | None], int]:
    """Step labels and the first error from the PRM's P(good) at ``threshold``. Given ``solution_correct`` (the
    answer key's grade; only with ``--use-answer-key``) the label pipeline's conventions apply: the last step (the
    answer) is labeled by the grade (``last_step_label``), and with ``trust_correct`` a right answer makes every
    step positive (the labels' ``--trust-correct``)."""
    from pipeline.labeling.last_step import last_step_label

    if trust_correct and solution_correct is True:
        return [True] * len(probs), -1
    labels = [None if p is None else p >= threshold for p in probs]
    if labels and solution_correct is not None:
        labels[-1] = last_step_label(solution_correct)
    fe = next((i for i, x in enumerate(labels) if x is False), -1)
    return labels, fe


def corpus_trusts_correct(card: dict) -> bool:
    """Whether the corpus a PRM learned from labeled right answers error-free (its ``trust_correct``; for a card
    written before that was recorded, the strategy's default: on for all but per-step)."""
    from pipeline.options import STRATEGIES, LabelingOptions

    corpus = card.get("corpus") or {}
    if corpus.get("trust_correct") is not None:
        return bool(corpus["trust_correct"])
    strategy = corpus.get("strategy")
    return strategy in STRATEGIES and LabelingOptions(strategy=strategy).effective_trust_correct()


def _table(rows: Sequence[ScoreRow], probs, correct, threshold: float, use_answer_key: bool = False,
           trust_correct: bool = False):
    import pyarrow as pa

    from pipeline.solution import LabeledSolution, Solution, StepStats
    from pipeline.storage.schema import to_table

    labeled = []
    for r, p, sc in zip(rows, probs, correct, strict=True):
        labels, fe = labels_from_scores(p, threshold, sc if use_answer_key else None, trust_correct)
        sol = Solution(r.id, r.problem, r.answer or "", tuple(r.steps), r.source)
        labeled.append(LabeledSolution(sol, labels, [StepStats() for _ in r.steps], fe, sc, 0, 0, STRATEGY,
                                       extra={"prm_score": list(p)}))
    table = to_table(labeled, 0)
    # no Monte Carlo estimate exists: the value, its interval and the first-error confidence are null
    n = table.num_rows
    for name in ("mc_value", "mc_low", "mc_high"):
        if name in table.column_names:
            col = pa.array([[None] * len(r.steps) for r in rows], type=table.schema.field(name).type)
            table = table.set_column(table.column_names.index(name), table.schema.field(name), col)
    if "first_error_confidence" in table.column_names:
        i = table.column_names.index("first_error_confidence")
        table = table.set_column(i, table.schema.field(i), pa.nulls(n, type=table.schema.field(i).type))
    if "prm_score" not in table.column_names:
        raise ScoreError("this mcprm's corpus schema has no prm_score column (pipeline/storage/schema.py)")
    return table


@dataclass
class ScoreResult:
    output: str
    version: int
    solutions: int
    steps: int
    threshold: float
    with_error: int
    seconds: float
    scoring_seconds: float
    cut_solutions: int = 0  # solutions with steps past the PRM's max length (unscored, unlabeled)
    cut_steps: int = 0
    max_length: int = 0
    use_answer_key: bool = False


def score(prm: str, inputs: Sequence[str], output: str, *, threshold: float | None = None, batch_size: int = 32,
          shard_rows: int = 10_000, overwrite: bool = False, device: str | None = None,
          problem_field: str = "problem", steps_field: str = "steps", answer_field: str = "answer",
          id_field: str = "id", grade: bool = True, use_answer_key: bool = False,
          trust_correct: bool | None = None, max_length: int | None = None, progress: bool = False) -> ScoreResult:
    """Score the solutions of ``inputs`` with the PRM folder ``prm`` into the corpus ``output`` (a new corpus,
    or with ``overwrite`` a new version of an earlier scored one). Nothing is written before every row is read
    and scored; the version is committed atomically. The labels are the PRM's alone unless ``use_answer_key``
    (module doc); ``max_length`` replaces the PRM's own (longer solutions are scored whole)."""
    t0 = time.perf_counter()
    if threshold is not None and not 0 < threshold < 1:
        raise ScoreError(f"--threshold must be in (0, 1), got {threshold}")
    if shard_rows < 1 or batch_size < 1:
        raise ScoreError("--shard-rows and --batch-size must be at least 1")
    if trust_correct is not None and not use_answer_key:
        raise ScoreError("--trust-correct/--no-trust-correct says how the answer key labels a right answer; it "
                         "needs --use-answer-key (without it the labels are the PRM's alone)")
    if max_length is not None and max_length < 8:
        raise ScoreError(f"--max-length must be at least 8, got {max_length}")
    from pipeline.storage.output import check_output_folder
    from pipeline.storage.store import CorpusStore

    check_output_folder(output)
    store = CorpusStore(output)
    current = store.manifest() if not store.is_empty() else None
    if not store.is_empty() and not overwrite:
        what = "a corpus" if current else "files"
        raise ScoreError(f"{output} already holds {what}; pass --overwrite to write the scores as a new version "
                         "there, or choose another --output")
    if current is not None and current.get("strategy") != STRATEGY:
        raise ScoreError(f"{output} holds a labeled corpus (strategy {current.get('strategy')}); scores are never "
                         "written over Monte Carlo labels: choose another --output")
    rows = read_solutions(inputs, problem_field, steps_field, answer_field, id_field)
    loaded = load_prm(prm, device)
    if max_length is not None:
        import dataclasses

        loaded.fmt = dataclasses.replace(loaded.fmt, max_length=max_length)
    thr = loaded.threshold if threshold is None else threshold
    ts = time.perf_counter()
    probs = predict_probs(loaded.model, loaded.tokenizer, loaded.fmt, loaded.sep_id,
                          [(r.problem, r.steps) for r in rows], batch_size=batch_size,
                          on_batch=_progress_lines(ts, len(rows)) if progress else None)
    scoring_s = time.perf_counter() - ts
    correct = grade_own_answers(rows) if grade or use_answer_key else [None] * len(rows)
    # with the answer key: a right final answer is error-free where the PRM's corpus labeled it so, unless told
    trust = ((corpus_trusts_correct(loaded.card) if trust_correct is None else bool(trust_correct))
             if use_answer_key else False)
    table = _table(rows, probs, correct, thr, use_answer_key, trust)
    cut_rows, cut = cut_steps(probs)
    version = _commit(store, table, shard_rows, {
        "prm": str(Path(prm).resolve()) if Path(prm).exists() else prm, "input": list(inputs),
        "threshold": thr, "prm_threshold": loaded.threshold, "prm_card": _card_summary(loaded.card),
        "device": loaded.device, "torch_threads": torch_threads(loaded.device), "batch_size": batch_size, "use_answer_key": use_answer_key,
        "trust_correct": trust, "max_length": loaded.fmt.max_length,
        "cut": {"solutions": cut_rows, "steps": cut},
    }, scoring_s, len(rows))
    fe = table.column("first_error").to_pylist()
    return ScoreResult(output, version, len(rows), sum(len(r.steps) for r in rows), thr,
                       sum(1 for x in fe if x != -1), time.perf_counter() - t0, scoring_s, cut_rows, cut,
                       loaded.fmt.max_length, use_answer_key)


def _progress_lines(t0: float, total: int, every_s: float = 10.0):
    """``on_batch`` for :func:`predict_probs`: a line on stderr when scoring starts, then at most one every
    ``every_s`` seconds, and at the end (a long scoring run was silent for minutes)."""
    import sys

    print(f"[mcprm] score: the PRM is loaded; scoring {total:,} solutions", file=sys.stderr, flush=True)
    last = [time.perf_counter()]

    def on_batch(done: int, n: int) -> None:
        now = time.perf_counter()
        if done < n and now - last[0] < every_s:
            return
        last[0] = now
        print(f"[mcprm] score: {done:,}/{n:,} solutions in {now - t0:.0f} s", file=sys.stderr, flush=True)

    return on_batch


def torch_threads(device: str) -> int | None:
    """The torch threads a model on ``device`` ran with (None on a GPU: its kernels are not torch's CPU threads)."""
    if device != "cpu":
        return None
    import torch

    return torch.get_num_threads()


def _card_summary(card: dict) -> dict:
    keep = ("base_model", "label_rule", "targets", "threshold", "corpus", "validation")
    return {k: card[k] for k in keep if k in card}


def _commit(store, table, shard_rows: int, config: dict, scoring_s: float, n: int) -> int:
    from pipeline.storage.lock import corpus_lock
    from pipeline.storage.manifest import versions
    from pipeline.storage.schema import SCHEMA_VERSION
    from pipeline.storage.store import Fenced

    # the label pipeline's protocol (pipeline.run): under the corpus lock, the next version number, shard names
    # carrying this owner's id, the version file created exclusively, manifest.json last
    with corpus_lock(store) as lock:
        last = store.manifest()
        version = store.next_version()
        owned = Fenced(version, lock.owner)
        shards = []
        for i, start in enumerate(range(0, max(table.num_rows, 1), shard_rows)):
            part = table.slice(start, shard_rows)
            rel = store.shard_rel(owned, i)
            d = store.write_table(rel, part)
            shards.append({"path": rel, "rows": part.num_rows, "version": version, **d})
        ident = {"strategy": STRATEGY, "prm": config["prm"], "threshold": config["threshold"],
                 "use_answer_key": config["use_answer_key"]}
        identity = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest = {
            "format": "mcprm-corpus",
            "schema_version": SCHEMA_VERSION,
            "version": version,
            "created": now,
            "identity": identity,
            "identity_fields": ident,
            "config": {"strategy": STRATEGY, **config},
            "versions": versions(),
            "strategy": STRATEGY,
            "k": 0,
            "shards": shards,
            "history": ((last or {}).get("history") or []) + [
                {"version": version, "identity": identity, "added": n, "reused": 0, "rejected": 0,
                 "duplicates_in_input": 0, "shards": [s["path"] for s in shards], "rollouts": 0,
                 "rollout_tokens": 0, "created": now}],
            "counts": {"solutions": n, "added": n, "reused": 0, "rejected": 0, "duplicates_in_input": 0,
                       "steps_added": int(sum(len(x) for x in table.column("steps").to_pylist())),
                       "rollouts": 0, "rollout_tokens": 0, "reused_rollouts": 0},
            "totals": {"rollouts": 0, "rollout_tokens": 0},
            "throughput": {"seconds": round(scoring_s, 3), "startup_seconds": 0.0,
                           "labeling_seconds": round(scoring_s, 3), "workers": 1, "gpus": 0,
                           "solutions_per_s": round(n / scoring_s, 2) if scoring_s > 0 else None,
                           "rollouts_per_s": None, "generated_tokens_per_s": None,
                           "generated_tokens_per_s_incl_startup": None, "prefix_cache_hit_rate": None,
                           "retried_shards": {}, "backend": {}},
            "notes": ["scored by a PRM (mcprm score): no Monte Carlo rollouts; mc_* counts are 0 and mc_value, "
                      "mc_low, mc_high and first_error_confidence are null; prm_score holds the step "
                      "probabilities"],
        }
        store.commit(manifest, fence=lock.check)
    return version
