"""Label quality: compare a corpus's labels with reference labels (``mcprm eval``); on a scored corpus (``mcprm
score``'s) also the PRM evaluation protocol from its ``prm_score`` (:mod:`pipeline.training.protocol`), and
:func:`compare` of two scored corpora of the same solutions. Label rules are refused on a scored corpus: it has
no Monte Carlo counts, and a rule would relabel from the gold answer's grade alone.

Reference formats
-----------------
* ``synthetic``: the bundled task's exact checker (:func:`pipeline.bundled.synthetic.check_steps`) judges every row.
* ProcessBench-style rows (JSONL/Parquet, any fsspec URL): ``id``, ``steps``, ``label`` = index of the first
  wrong step or -1.
* PRM800K-style rows: ``id``, ``steps``, ``ratings`` = one of -1/0/1 per step; the first -1 is the first
  error, 0 (neutral) counts as not an error (``neutral_is_error=True`` flips that).

Rows are matched by ``id``, or by their steps when the id is unknown.

Metrics
-------
* First-error localisation, ProcessBench's metric: ``acc_error`` = share of reference-erroneous solutions
  whose predicted first error is exactly the reference one; ``acc_correct`` = share of reference-correct
  solutions predicted error-free (-1); ``f1`` = their harmonic mean.
* Step level, on steps up to and including the reference first error (steps after it have no reference
  label, the ProcessBench/PRM800K convention) and labeled by the corpus: ``step_accuracy``, and precision /
  recall of the negative class (error detection) and of the positive class.
* Soft labels: ``brier`` = mean squared error of ``mc_value`` against the reference 0/1 on the same steps,
  those that have an ``mc_value`` (sampled: ``brier_steps`` of them); saying 0.5 everywhere scores 0.25, so a
  larger value is worse than no information (MC values of a small model sit near 0 on steps that are right).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pipeline.errors import FatalError


@dataclass
class RefRow:
    first_error: int
    step_ok: list[bool | None] | None  # per step, None where the reference says nothing


def _harmonic(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def _load_reference_rows(ref: str, neutral_is_error: bool) -> tuple[dict, dict]:
    """Returns (by_id, by_steps) maps of RefRow."""
    from pipeline.storage.fs import filesystem

    by_id: dict[str, RefRow] = {}
    by_steps: dict[tuple, RefRow] = {}
    fs, path = filesystem(ref)
    if not fs.exists(path):
        raise FileNotFoundError(f"reference {ref} does not exist (use 'synthetic' for the bundled task's checker)")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        with fs.open(path, "rb") as f:
            rows = pq.read_table(f, use_threads=False).to_pylist()
    else:
        rows = []
        with fs.open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{ref} line {n}: not valid JSON ({e.msg})") from None
    for n, r in enumerate(rows, 1):
        steps = r.get("steps")
        if "ratings" in r and r["ratings"] is not None:
            ratings = list(r["ratings"])
            bad = [i for i, x in enumerate(ratings) if x == -1 or (neutral_is_error and x == 0)]
            fe = bad[0] if bad else -1
            ok = [None if (fe != -1 and i > fe) else (i != fe) for i in range(len(ratings))]
            row = RefRow(fe, ok)
        elif "label" in r:
            try:
                fe = int(r["label"])
            except (TypeError, ValueError):
                raise ValueError(f"{ref} row {n}: field 'label' must be an int (first-error index or -1)") from None
            m = len(steps) if steps is not None else None
            ok = None if m is None else [None if (fe != -1 and i > fe) else (i != fe) for i in range(m)]
            row = RefRow(fe, ok)
        else:
            raise ValueError(f"{ref} row {n}: needs a 'label' (ProcessBench) or 'ratings' (PRM800K) field")
        if r.get("id") is not None:
            by_id[str(r["id"])] = row
        if steps is not None:
            by_steps[tuple(steps)] = row
    return by_id, by_steps


class ReferenceNeeded(FatalError, ValueError):
    """The corpus is not the bundled synthetic task, so its labels need a reference file to be judged."""

    def __init__(self, output: str, row: dict, given: str | None):
        what = ("--reference synthetic judges only the bundled task ('Compute <expression>.' problems)"
                if given == "synthetic" else "no --reference given, and the corpus is not the bundled synthetic "
                                             "task, so there is no built-in checker")
        super().__init__(
            f"{output}: row {row.get('id')!r} has the problem {str(row.get('problem'))[:60]!r}: {what}. Pass "
            "--reference FILE: a JSONL/Parquet file of reference labels, ProcessBench-style (id, steps, label = "
            "index of the first wrong step or -1) or PRM800K-style (id, steps, ratings = -1/0/1 per step)")


def _reference_lookup(output: str, reference: str | None, neutral_is_error: bool):
    """``lookup(row) -> RefRow | None``: the reference's verdict on a corpus row (by id, else by steps), or the
    bundled task's exact checker for ``None`` / ``"synthetic"``."""
    if reference is None or reference == "synthetic":
        from pipeline.bundled.synthetic import check_steps

        def lookup(r):
            try:
                res = check_steps(r["problem"], list(r["steps"]))
            except ValueError:  # own data has no built-in checker; say what to pass instead
                raise ReferenceNeeded(output, r, given=reference) from None
            fe = res.first_error
            ok = [None if (fe != -1 and i > fe) else (i != fe) for i in range(len(r["steps"]))]
            return RefRow(fe, ok)
        return lookup
    by_id, by_steps = _load_reference_rows(reference, neutral_is_error)

    def lookup(r):
        return by_id.get(str(r["id"])) or by_steps.get(tuple(r["steps"]))
    return lookup


class EvalError(FatalError, ValueError):
    """``mcprm eval`` cannot measure what was asked; the message says what to do instead."""


def is_scored(manifest: dict) -> bool:
    """Whether a corpus version was written by ``mcprm score`` (PRM scores, no Monte Carlo counts)."""
    from pipeline.training.score import STRATEGY

    return manifest.get("strategy") == STRATEGY


def read_scored(output: str, reference: str | None = None, version: int | None = None,
                neutral_is_error: bool = False) -> tuple[list, dict]:
    """(the scored corpus's solutions matched with the reference, as :class:`pipeline.training.protocol.Scored`;
    its manifest). Reads ``prm_score`` only: the stored labels may have used the gold answer
    (``--use-answer-key``), the scores never do."""
    from pipeline.corpus import iter_corpus, open_manifest
    from pipeline.training.protocol import Scored

    _, manifest = open_manifest(output, version)
    if not is_scored(manifest):
        raise EvalError(f"{output} is a labeled corpus (strategy {manifest.get('strategy')}), not one written by "
                        "`mcprm score`: the PRM protocol and --compare measure a PRM's scores. Score solutions "
                        "first: `mcprm score PRM --input SOLUTIONS --output OUT`")
    lookup = _reference_lookup(output, reference, neutral_is_error)
    out = []
    for b in iter_corpus(output, version, ["id", "problem", "steps", "prm_score"]):
        for r in b.to_pylist():
            ref = lookup(r)
            if ref is None:
                continue
            scores = list(r["prm_score"] or [None] * len(r["steps"]))
            ok = ref.step_ok if ref.step_ok is not None and len(ref.step_ok) == len(scores) else None
            out.append(Scored(str(r["id"]), r["problem"], scores, ref.first_error, ok))
    if not out:
        raise ValueError(f"no row of {output} matches the reference {reference} (by id or by steps)")
    return out, manifest


def own_threshold(manifest: dict) -> float | None:
    """The threshold the PRM's own training chose (``mcprm score`` records it; ``--threshold`` may have
    labeled with another)."""
    cfg = manifest.get("config") or {}
    t = cfg.get("prm_threshold", cfg.get("threshold"))
    return None if t is None else float(t)


def compare(first: str, second: str, reference: str | None = None, version: int | None = None,
            second_version: int | None = None, neutral_is_error: bool = False, bootstrap: int = 2000,
            seed: int = 0, level: float = 0.95) -> dict:
    """The protocol's numbers of two scored corpora of the same solutions and their paired differences (first
    minus second) with bootstrap intervals (:func:`pipeline.training.protocol.paired`)."""
    from pipeline.training.protocol import paired

    a, ma = read_scored(first, reference, version, neutral_is_error)
    b, mb = read_scored(second, reference, second_version, neutral_is_error)
    res = paired(a, b, own_threshold(ma), own_threshold(mb), n_boot=bootstrap, seed=seed, level=level)
    return {"first": first, "second": second, "reference": reference or "synthetic", **res}


def evaluate(output: str, reference: str | None = None, version: int | None = None,
             neutral_is_error: bool = False, label_rule: str | None = None) -> dict:
    """Metrics of one corpus against ``reference``: a reference file, or ``"synthetic"`` (the bundled task's
    exact checker); None: the checker if the corpus is the bundled task, else :class:`ReferenceNeeded`.
    ``label_rule`` (pipeline.labeling.rules) relabels every row from its stored counts first (None: the stored
    labels); ``label_rule="all"``: use :func:`evaluate_rules`."""
    from pipeline.corpus import iter_corpus, open_manifest
    from pipeline.stats.calibration import auroc, ece

    _, manifest = open_manifest(output, version)
    scored = is_scored(manifest)
    if scored and label_rule:
        raise EvalError(
            f"{output} was written by `mcprm score`: its labels are the PRM's, and it has no Monte Carlo counts "
            f"for --label-rule {label_rule} to relabel from (the rules would read only the gold answer's grade of "
            "the final step). Leave out --label-rule: `mcprm eval` then measures the PRM's scores (step AUROC, "
            "F1 at 0.5, at its own threshold and at a cross-fitted one) and its stored labels")
    n_rows = rollouts = rollout_tokens = 0

    def corpus_rows():  # streamed batch by batch: memory bounded by a batch, not by the corpus
        nonlocal n_rows, rollouts, rollout_tokens
        for b in iter_corpus(output, version, ["id", "problem", "steps", "labels", "mc_value", "first_error",
                                               "rollouts", "rollout_tokens", "first_error_confidence"]
                             + (_RULE_COLUMNS if label_rule else [])):
            n_rows += b.num_rows
            if label_rule:  # the labels of another rule, from the same counts
                yield from (_relabel(r, label_rule) for r in b.to_pylist())
            else:
                yield from b.to_pylist()

    rows = corpus_rows()
    lookup = _reference_lookup(output, reference, neutral_is_error)

    n_err = n_err_hit = n_ok = n_ok_hit = 0
    tp_neg = fp_neg = fn_neg = tp_pos = fp_pos = fn_pos = 0
    step_n = step_hit = 0
    brier_sum = 0.0
    brier_n = 0
    matched = 0
    brier_sq = tok_sq = 0.0  # sums of squares, for standard errors
    stated: list[float] = []  # first_error_confidence of rows decided by rollouts, and whether each was right
    stated_right: list[bool] = []
    for r in rows:
        rollouts += r["rollouts"]
        rollout_tokens += r["rollout_tokens"]
        tok_sq += float(r["rollout_tokens"]) ** 2
        ref = lookup(r)
        if ref is None:
            continue
        matched += 1
        pred = r["first_error"]
        if r["rollouts"] > 0 and r.get("first_error_confidence") is not None and not label_rule:
            stated.append(r["first_error_confidence"])
            stated_right.append(pred == ref.first_error)
        if ref.first_error == -1:
            n_ok += 1
            n_ok_hit += pred == -1
        else:
            n_err += 1
            n_err_hit += pred == ref.first_error
        if ref.step_ok is None or len(ref.step_ok) != len(r["labels"]):
            continue
        for lab, val, truth in zip(r["labels"], r["mc_value"], ref.step_ok):
            if truth is None:
                continue
            if val is not None:
                brier_sum += (val - (1.0 if truth else 0.0)) ** 2
                brier_sq += (val - (1.0 if truth else 0.0)) ** 4
                brier_n += 1
            if lab is None:
                continue
            step_n += 1
            step_hit += lab == truth
            if not lab and not truth:
                tp_neg += 1
            elif not lab and truth:
                fp_neg += 1
                fn_pos += 1
            elif lab and not truth:
                fn_neg += 1
                fp_pos += 1
            else:
                tp_pos += 1
    if matched == 0:
        raise ValueError(f"no row of {output} matches the reference {reference} (by id or by steps)")
    acc_error = n_err_hit / n_err if n_err else None
    acc_correct = n_ok_hit / n_ok if n_ok else None

    def ratio(a, b):
        return a / b if b else None

    prm = {}
    if scored:
        from pipeline.training.protocol import measure

        sols, _ = read_scored(output, reference, version, neutral_is_error)
        prm = {"prm": measure(sols, own_threshold(manifest)),
               # the stored labels (f1, acc_*, step_*) used the gold answer only when scored so
               "labels_use_answer_key": bool((manifest.get("config") or {}).get("use_answer_key"))}
    return {
        **prm,
        "output": output,
        "reference": reference or "synthetic",
        "version": manifest["version"],
        "strategy": manifest.get("strategy"),
        "k": manifest.get("k"),
        "solutions": matched,
        "unmatched": n_rows - matched,
        "solutions_with_error": n_err,
        "acc_error": acc_error,
        "acc_correct": acc_correct,
        "f1": _harmonic(acc_error, acc_correct),
        "steps_compared": step_n,
        "step_accuracy": ratio(step_hit, step_n),
        "error_precision": ratio(tp_neg, tp_neg + fp_neg),
        "error_recall": ratio(tp_neg, tp_neg + fn_neg),
        "positive_precision": ratio(tp_pos, tp_pos + fp_pos),
        "positive_recall": ratio(tp_pos, tp_pos + fn_pos),
        "brier": ratio(brier_sum, brier_n),
        "brier_steps": brier_n,  # the steps it is computed on: with an mc_value and a reference label
        "rollouts": int(rollouts),
        "rollout_tokens": int(rollout_tokens),
        # first_error_confidence against the reference, on the rows decided by rollouts (stored labels only: a
        # relabeling rule has other first errors than the confidence speaks of)
        "confidence_rows": len(stated),
        "confidence_ece": ece(stated, stated_right),
        "confidence_auroc": auroc(stated, stated_right),
        "label_rule": label_rule or "stored",
        **_standard_errors(acc_error, n_err, acc_correct, n_ok, ratio(step_hit, step_n), step_n,
                           brier_sum, brier_sq, brier_n, rollout_tokens, tok_sq, n_rows),
    }


# ------------------------------------------------------------------ label rules, standard errors
_RULE_COLUMNS = ["mc_correct", "mc_total", "mc_ungradable", "solution_correct"]


def _relabel(row: dict, rule: str) -> dict:
    from pipeline.labeling.rules import apply_rule

    res = apply_rule(row, rule)
    return {**row, "labels": res.labels, "first_error": res.first_error,
            "mc_value": [None if s is None else s for s in res.scores]}


def _standard_errors(acc_error, n_err, acc_correct, n_ok, step_acc, step_n, brier_sum, brier_sq, brier_n,
                     tokens, tok_sq, n_rows) -> dict:
    """Standard errors: binomial for the accuracies (steps treated as independent, so step_accuracy_se is a lower
    bound), the delta method for F1 (the two accuracies come from disjoint solutions), sample SEs of the mean
    for Brier and tokens per solution."""
    import math

    def binom(p, n):
        return math.sqrt(p * (1 - p) / n) if p is not None and n else None

    def mean_se(s, sq, n):
        if n < 2:
            return None
        m = s / n
        return math.sqrt(max(0.0, sq / n - m * m) / (n - 1))

    se_e, se_c = binom(acc_error, n_err), binom(acc_correct, n_ok)
    f1_se = None
    if se_e is not None and se_c is not None and acc_error + acc_correct > 0:
        d = (acc_error + acc_correct) ** 2
        f1_se = math.sqrt((2 * acc_correct ** 2 / d * se_e) ** 2 + (2 * acc_error ** 2 / d * se_c) ** 2)
    return {"acc_error_se": se_e, "acc_correct_se": se_c, "f1_se": f1_se,
            "step_accuracy_se": binom(step_acc, step_n), "brier_se": mean_se(brier_sum, brier_sq, brier_n),
            "tokens_per_solution": tokens / n_rows if n_rows else None,
            "tokens_per_solution_se": mean_se(tokens, tok_sq, n_rows)}


def evaluate_rules(output: str, reference: str | None = None, version: int | None = None,
                   neutral_is_error: bool = False, rules: list[str] | None = None) -> list[dict]:
    """:func:`evaluate` once per label rule (default: every rule), the same corpus and counts."""
    from pipeline.labeling.rules import RULES

    return [evaluate(output, reference, version, neutral_is_error, label_rule=name) for name in (rules or RULES)]
