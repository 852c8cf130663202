"""A labeled corpus -> training examples: each row's per-step targets under a label rule (or ``outcome``), how
sure its first error is, the split by problem (a hash of the problem text) and the tokenized examples
(:func:`prepare`)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.solution import UNREACHED
from pipeline.training.collate import CollateError, PrmFormat
from pipeline.training.options import UNREACHED_WEIGHT, TrainConfig, TrainError

log = logging.getLogger("mcprm")


def problem_group(problem: str) -> float:
    """A problem's place in [0, 1) by the hash of its text: the split by problem is ``group < val_fraction``."""
    h = hashlib.sha256(problem.strip().encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def row_targets(row: dict, rule: str, targets: str = "hard") -> tuple[list[float | None], int, float]:
    """(per-step targets, first error, first-error confidence) of one corpus row under ``rule``.

    ``outcome``: every step gets the solution's own final answer (1.0 right, 0.0 wrong; None when unknown) —
    an outcome reward model's labels. Any rule of :mod:`pipeline.labeling.rules`: hard targets are its labels
    (None stays None), soft targets its scores. The confidence is :func:`row_confidence` of the rule's first
    error."""
    from pipeline.labeling.rules import apply_rule

    n = len(row["steps"])
    if rule == "outcome":
        sc = row.get("solution_correct")
        if sc is None:
            return [None] * n, -1, 0.0
        return [1.0 if sc else 0.0] * n, (-1 if sc else 0), 1.0
    res = apply_rule(row, rule)
    if targets == "soft":
        t = [None if s is None else float(s) for s in res.scores]
    else:
        t = [None if lab is None else (1.0 if lab else 0.0) for lab in res.labels]
    return t, res.first_error, row_confidence(row, res)


def row_confidence(row: dict, res) -> float:
    """How sure the rule's first error is (``res``: the rule's result): the rule's own statement
    (:attr:`RuleResult.confidence`, the changepoint posterior); else the row's stored posterior of that first
    error (schema 4, :func:`pipeline.labeling.rules.confidence_of`), else the stored
    ``first_error_confidence`` when the rule's first error is the stored one; otherwise (and for a row without
    rollouts, labeled by its own answer) certain."""
    from pipeline.labeling.rules import confidence_of

    if res.confidence is not None:  # the rule's own (changepoint)
        return float(res.confidence)
    c = confidence_of(row, res.first_error)
    if c is not None:
        return float(c)
    stored = row.get("first_error_confidence")
    if stored is not None and res.first_error == row.get("first_error"):
        return float(stored)
    return 1.0


def row_tries(row: dict) -> tuple[float, float]:
    """(successes, tries) of the completer in one row: its first step's graded continuations and its own graded
    final answer."""
    c = n = 0.0
    if row.get("solution_correct") is not None:
        c += bool(row["solution_correct"])
        n += 1
    mc_c, mc_t, mc_u = (row.get(k) or [] for k in ("mc_correct", "mc_total", "mc_ungradable"))
    if mc_c and mc_t and mc_c[0] is not None and mc_t[0]:
        graded = mc_t[0] - ((mc_u[0] or 0) if mc_u else 0)
        if graded > 0:
            c += mc_c[0]
            n += graded
    return c, n


def solve_totals(cfg: TrainConfig) -> dict[str, tuple[float, float]]:
    """Per problem (text, stripped): the completer's (successes, tries) summed over the problem's rows
    (:func:`row_tries`). A pass over the corpus's count columns only."""
    from pipeline.corpus import iter_corpus

    got: dict[str, list[float]] = {}
    seen = 0
    for b in iter_corpus(cfg.corpus, cfg.version, ["problem", "solution_correct", "mc_correct", "mc_total",
                                                   "mc_ungradable"]):
        for r in b.to_pylist():
            if cfg.limit is not None and seen >= cfg.limit:
                break
            seen += 1
            c, n = row_tries(r)
            acc = got.setdefault(r["problem"].strip(), [0.0, 0.0])
            acc[0] += c
            acc[1] += n
    return {p: (c, n) for p, (c, n) in got.items()}


def solve_rate(totals: dict[str, tuple[float, float]], row: dict) -> float | None:
    """The completer's success rate on ``row``'s problem from the problem's *other* rows (the row's own answer
    and continuations are what its labels come from: a wrong row would lower its own rate); None where the
    other rows hold no graded try (nothing then says the completer fails the problem)."""
    c, n = totals.get(row["problem"].strip(), (0.0, 0.0))
    rc, rn = row_tries(row)
    return (c - rc) / (n - rn) if n - rn > 0 else None


def shape_weights(targets: list[float | None], weights: list[float], first_error: int, tolerance: int = 0,
                  negative_scale: float = 1.0) -> list[float]:
    """Step weights after the target options: no loss on the ``tolerance`` steps just before ``first_error``
    (``--error-tolerance``), negative targets (below 0.5) times ``negative_scale`` (``--solve-rate-floor``)."""
    out = list(weights)
    if tolerance and first_error > 0:
        for j in range(max(0, first_error - tolerance), min(first_error, len(out))):
            out[j] = 0.0
    if negative_scale != 1.0:
        out = [w * negative_scale if y is not None and y < 0.5 else w for y, w in zip(targets, out, strict=True)]
    return out


@dataclass
class Prepared:
    train: list
    val: list  # Examples
    val_rows: list[dict]  # id, problem, steps, first_error (the labels' own) of the validation rows
    counts: dict
    # problem, steps, solution_correct of up to OUTCOME_ROWS validation rows whose final answer was graded: what
    # the threshold is read from (train._finish); never training rows, whose scores the PRM has fitted
    outcome_rows: list[dict] = field(default_factory=list)


OUTCOME_ROWS = 2000  # validation rows the threshold is read from, at most (the lowest hashes of their ids)


def prepare(cfg: TrainConfig, tokenizer, fmt: PrmFormat, sep_id: int,
            targets_fn: Callable[[dict], tuple[list[float | None], int, float]] | None = None) -> Prepared:
    """Read the corpus, compute each row's targets, filter/weight, split by problem, tokenize."""
    from pipeline.corpus import iter_corpus, open_manifest
    from pipeline.training.collate import PieceCache, make_example, targets_until_first_error

    open_manifest(cfg.corpus, cfg.version)  # a clear error for a folder that is no corpus
    fn = targets_fn or (lambda r: row_targets(r, cfg.label_rule, cfg.targets))
    pieces = PieceCache(tokenizer)
    train, val, val_rows, outcome_rows = [], [], [], []
    c = {"corpus_rows": 0, "rows": 0, "train_rows": 0, "val_rows": 0, "train_problems": 0, "val_problems": 0,
         "skipped": {}, "train_steps": 0, "train_positive": 0.0, "train_negative": 0.0, "steps_cut": 0, "rows_cut": 0}
    problems = {"train": set(), "val": set()}
    totals = solve_totals(cfg) if cfg.solve_rate_floor is not None else None

    def skip(why: str) -> None:
        c["skipped"][why] = c["skipped"].get(why, 0) + 1

    for b in iter_corpus(cfg.corpus, cfg.version):  # every column: the rules read what the schema version has
        for r in b.to_pylist():
            if cfg.limit is not None and c["corpus_rows"] >= cfg.limit:
                break
            c["corpus_rows"] += 1
            where = f"{cfg.corpus} row {c['corpus_rows'] - 1} (id {r.get('id')!r})"
            steps = list(r["steps"] or [])
            if not steps:
                skip("no_steps")
                continue
            try:
                t, fe, conf = fn(r)
            except (ValueError, KeyError, TypeError) as e:
                raise TrainError(f"{where}: its labels cannot be read under --label-rule {cfg.label_rule} ({e})") from e
            # an outcome model's every step carries the solution's grade: cutting after the "first error" would
            # teach a wrong solution's step 1 to be the error
            if cfg.drop_after_first_error and cfg.label_rule != "outcome":
                t = targets_until_first_error(t, [None if x is None else x >= 0.5 for x in t])
            if all(x is None for x in t):
                skip("no_labels")
                continue
            if cfg.min_confidence is not None and conf < cfg.min_confidence:
                skip("low_confidence")
                continue
            weight = conf if cfg.weight_by_confidence else 1.0
            if r.get("label_status") == UNREACHED and cfg.label_rule != "outcome":
                if cfg.unreached == "drop":
                    skip("unreached")
                    continue
                if cfg.unreached == "down-weight":
                    weight *= UNREACHED_WEIGHT
            is_val = problem_group(r["problem"]) < cfg.val_fraction
            try:
                ex = make_example(tokenizer, fmt, sep_id, r["problem"], steps, t, weight, pieces)
            except CollateError as e:
                skip("too_long" if "max_length" in str(e) else "bad_row")
                log.warning("%s: %s; left out", where, e)
                continue
            if cfg.error_tolerance or totals is not None:
                rate = None if totals is None else solve_rate(totals, r)
                scale = 1.0 if rate is None else min(1.0, rate / cfg.solve_rate_floor)
                ex.weights = shape_weights(ex.targets, ex.weights, fe, cfg.error_tolerance, scale)
            cut = len(steps) - len(ex.positions)
            c["steps_cut"] += cut
            c["rows_cut"] += int(cut > 0)
            c["rows"] += 1
            if is_val and r.get("solution_correct") is not None:  # the threshold is fitted on validation only
                outcome_rows.append({"id": r["id"], "problem": r["problem"], "steps": steps,
                                     "key": problem_group(str(r["id"])),
                                     "solution_correct": bool(r["solution_correct"])})
            if is_val:
                val.append(ex)
                problems["val"].add(r["problem"])
                val_rows.append({"id": r["id"], "problem": r["problem"], "steps": steps, "first_error": fe})
            else:
                train.append(ex)
                problems["train"].add(r["problem"])
                for y, w in zip(ex.targets, ex.weights, strict=True):
                    if y is None or w <= 0:
                        continue
                    c["train_steps"] += 1
                    c["train_positive"] += y
                    c["train_negative"] += 1 - y
        else:
            continue
        break
    c["train_rows"], c["val_rows"] = len(train), len(val)
    c["train_problems"], c["val_problems"] = len(problems["train"]), len(problems["val"])
    if c["corpus_rows"] == 0:
        raise TrainError(f"{cfg.corpus} holds no rows: nothing to train on. Label some solutions first "
                         f"(`mcprm label --output {cfg.corpus}`).")
    if not train:
        why = ", ".join(f"{k}: {v}" for k, v in c["skipped"].items()) or "every row went to validation"
        raise TrainError(f"{cfg.corpus}: no row is left to train on ({c['corpus_rows']} rows; {why}). Lower "
                         "--min-confidence or --val-fraction, or choose another --label-rule.")
    outcome_rows.sort(key=lambda x: x["key"])
    return Prepared(train, val, val_rows, c, outcome_rows[:OUTCOME_ROWS])
