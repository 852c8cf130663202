"""``mcprm eval OUT --reference REF``: label quality against reference labels."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import CORPUS_DEFAULT, AsJson, Corpus, Version, print_table, user_errors


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)


def eval_cmd(
    output: Corpus = CORPUS_DEFAULT,
    reference: Annotated[str | None, typer.Option(
        metavar="FILE", help="Reference labels: a ProcessBench-style (label) or PRM800K-style (ratings) JSONL/Parquet "
                             "file, or 'synthetic' (the bundled task's exact checker). (default: 'synthetic' for "
                             "a corpus of the bundled task; other data needs a file)")] = None,
    version: Version = None,
    neutral_is_error: Annotated[bool, typer.Option(help="PRM800K: count rating 0 as an error.")] = False,
    as_json: AsJson = False,
    label_rule: Annotated[str | None, typer.Option(help="Relabel from the stored counts first: hard, threshold, "
                                                        "soft, relative, ratio, advantage, er-prm, changepoint, or 'all' "
                                                        "(one table row per rule; docs/labels.md). Refused on a "
                                                        "scored corpus (`mcprm score`'s).")] = None,
    compare_with: Annotated[str | None, typer.Option(
        "--compare", metavar="SCORED",
        help="A second scored corpus of the same solutions: both PRMs' protocol numbers and their paired "
             "differences (this one minus SCORED) with bootstrap intervals over problems (docs/training.md).")] = None,
    compare_version: Annotated[int | None, typer.Option(help="Version of the --compare corpus (default: its "
                                                             "latest).")] = None,
    bootstrap: Annotated[int, typer.Option(help="--compare: bootstrap resamples of the problems.")] = 2000,
    seed: Annotated[int, typer.Option(help="--compare: seed of the bootstrap resamples.")] = 0,
) -> None:
    """First-error F1 (ProcessBench), step accuracy/precision/recall, Brier score, rollout tokens spent; on a
    scored corpus also the PRM protocol from its scores: step AUROC, F1 at 0.5, at the PRM's own threshold and
    at a threshold cross-fitted over two halves of the problems."""
    from pipeline.commands.evaluate import evaluate

    if compare_with is not None:
        return _compare(output, compare_with, reference, version, compare_version, neutral_is_error, bootstrap,
                        seed, as_json, label_rule)
    if label_rule == "all":
        return _eval_all_rules(output, reference, version, neutral_is_error, as_json)
    with user_errors(extra=(ValueError,)):  # a bad reference file names its row
        m = evaluate(output, reference, version, neutral_is_error, label_rule=label_rule)
    if as_json:
        print(json.dumps(m, indent=2))
        return
    rows = []
    for key in ("solutions", "solutions_with_error", "f1", "acc_error", "acc_correct", "steps_compared",
                "step_accuracy", "error_precision", "error_recall", "positive_precision", "positive_recall",
                "brier", "rollouts", "rollout_tokens"):
        v = m[key]
        rows.append((METRIC_NAMES.get(key, key),
                     "n/a" if v is None else (f"{v:.4f}" if isinstance(v, float) else f"{v:,}")))
    print_table(f"{output} vs {m['reference']} (strategy {m['strategy']}, K={m['k']})", rows)
    if "prm" in m:
        print("stored labels: set with the answer key (--use-answer-key): the rows above are not the PRM's alone"
               if m["labels_use_answer_key"] else "stored labels: the PRM's alone (no answer key)")
        print_table("PRM protocol, from prm_score only (no answer key)", protocol_rows(m["prm"]))
        return
    print(brier_note(m))
    print(confidence_note(m))


def _f(v, se=None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4f}" + (f" ±{se:.4f}" if se is not None else "")


def protocol_rows(p: dict) -> list[tuple[str, str]]:
    """The protocol's numbers of one scored corpus (pipeline.training.protocol.measure) as table rows."""
    halves = "; ".join(f"half {1 - x['chosen_on_half']} at {x['threshold']:.2f}: {_f(x['f1'])}"
                       for x in p["cross_fit"] if x["threshold"] is not None) or "n/a (a half lacks a kind)"
    own = "n/a" if p["own_threshold"] is None else f"{p['own_threshold']:.2f}"
    return [
        ("solutions (with an error)", f"{p['solutions']:,} ({p['solutions_with_error']:,})"),
        ("step AUROC (steps up to the reference's first error)", f"{_f(p['step_auroc'])} on "
                                                                 f"{p['steps_scored']:,} steps"),
        ("F1 at 0.5", _f(p["f1_at_0.5"])),
        (f"F1 at the PRM's own threshold ({own})", _f(p["f1_own"])),
        ("F1 at a cross-fitted threshold (chosen on one half of the problems, read on the other)",
         f"{_f(p['f1_cross'])} ({halves})"),
        (f"F1 at the threshold best on these solutions ({p['oracle_threshold']:.2f}; optimistic)",
         _f(p["f1_oracle"])),
    ]


def _compare(output, other, reference, version, other_version, neutral_is_error, bootstrap, seed, as_json,
             label_rule) -> None:
    from pipeline.commands.evaluate import EvalError, compare

    with user_errors(extra=(ValueError,)):
        if label_rule:
            raise EvalError("--compare measures two PRMs' scores; it takes no --label-rule")
        c = compare(output, other, reference, version, other_version, neutral_is_error, bootstrap, seed)
    if as_json:
        print(json.dumps(c, indent=2))
        return
    print_table(f"first: {output}", protocol_rows(c["first"]))
    print_table(f"second: {other}", protocol_rows(c["second"]))
    pct = round(100 * c["level"])
    rows = [(name, f"{_f(d['difference'], d['se'])}  [{_f(d['low'])}, {_f(d['high'])}]")
            for name, d in c["differences"].items()]
    print_table(f"first minus second on {c['solutions']:,} solutions of {c['problems']:,} problems "
                f"(difference ±SE [{pct}% bootstrap interval], {c['bootstrap']:,} resamples of the problems, "
                f"seed {c['seed']})", rows)
    if c["only_in_first"] or c["only_in_second"]:
        print(f"left out: {c['only_in_first']:,} solutions only in the first, {c['only_in_second']:,} only in the "
              "second")


# what each number is computed on, beside its name (the JSON keeps the bare names)
METRIC_NAMES = {
    "solutions": "solutions (matched with the reference)",
    "solutions_with_error": "solutions_with_error (by the reference)",
    "f1": "f1 (first error, ProcessBench)",
    "steps_compared": "steps_compared (labeled, up to the reference's first error)",
    "brier": "brier (mc_value vs reference 0/1; always 0.5 = 0.25)",
    "rollouts": "rollouts (the corpus's)",
    "rollout_tokens": "rollout_tokens (the corpus's)",
}


def brier_note(m: dict) -> str:
    """What the Brier score is computed on and what to compare it with, in words."""
    if m.get("brier") is None:
        return "brier: n/a (no step has both an mc_value and a reference label)"
    b = m["brier"]
    than = "better than" if b < 0.25 else "no better than"
    from pipeline.commands.advice import brier_advice

    advice = brier_advice(b)
    return (f"brier {b:.3f}: mean squared error of mc_value against the reference's 0/1, on the "
            f"{m.get('brier_steps', 0):,} steps up to the reference's first error that have an mc_value (sampled "
            f"steps); always saying 0.5 scores 0.25, so {b:.3f} is {than} that (lower is better)."
            + (f" {advice}." if advice else ""))


def confidence_note(m: dict) -> str:
    """How true ``first_error_confidence`` was against the reference: as a probability (ECE) and as a ranking
    (AUROC), on the rows decided by rollouts."""
    if not m.get("confidence_rows"):
        return ("first_error_confidence: n/a (no row decided by rollouts has one" +
                ("; a relabeling rule has other first errors)" if m.get("label_rule") not in (None, "stored") else ")"))
    auroc = m.get("confidence_auroc")
    ranks = ("n/a (every first error right, or every one wrong)" if auroc is None else
             f"{auroc:.3f} (0.5: says nothing; 1: right first errors always stated higher)")
    return (f"first_error_confidence on {m['confidence_rows']:,} rows decided by rollouts: as a probability, ECE "
            f"{m['confidence_ece']:.3f} (5 bins; about 0.02 on 400 rows for a perfect one); as a ranking, AUROC "
            f"{ranks}.")


def _eval_all_rules(output, reference, version, neutral_is_error, as_json) -> None:
    """``--label-rule all``: one row per label rule, computed from the same stored counts."""
    from pipeline.commands.evaluate import evaluate_rules

    with user_errors(extra=(ValueError,)):
        ms = evaluate_rules(output, reference, version, neutral_is_error)
    if as_json:
        print(json.dumps(ms, indent=2))
        return

    def f(v, se=None):
        if v is None:
            return "n/a"
        return f"{v:.3f}" + (f" ±{se:.3f}" if se is not None else "")

    print(f"{output} vs {ms[0]['reference']} (strategy {ms[0]['strategy']}, K={ms[0]['k']}, {ms[0]['solutions']} solutions)")
    print(f"{'rule':12} {'F1':>14} {'acc_error':>10} {'acc_correct':>11} {'step_acc':>14} {'brier':>14}")
    for m in ms:
        print(f"{m['label_rule']:12} {f(m['f1'], m['f1_se']):>14} {f(m['acc_error']):>10} {f(m['acc_correct']):>11} "
              f"{f(m['step_accuracy'], m['step_accuracy_se']):>14} {f(m['brier'], m['brier_se']):>14}")
