"""``mcprm stats OUT``: a summary of a labeled corpus."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import (
    CORPUS_DEFAULT,
    AsJson,
    Corpus,
    Version,
    corpus_warnings,
    echo,
    print_table,
    repeat_warnings,
    user_errors,
)


def register(app: typer.Typer) -> None:
    app.command("stats")(stats_cmd)


def stats_cmd(
    output: Corpus = CORPUS_DEFAULT,
    version: Version = None,
    as_json: AsJson = False,
    verify: Annotated[bool, typer.Option("--verify", help="Check every shard's sha256, schema and rows first.")] = False,
) -> None:
    """Solutions, steps, label balance, first-error distribution, rollouts and tokens spent, and the
    continuations that ended with no final answer (counted as incorrect)."""
    from pipeline.corpus import corpus_stats

    with user_errors():
        s = corpus_stats(output, version, verify=verify)
        s["warnings"] = corpus_warnings(output, version)  # the labeling run's, repeated
        from pipeline.labeling.rules import corpus_uncertainty  # how far to trust the labels
        from pipeline.storage.confidence import reads_as

        s["uncertainty"] = corpus_uncertainty(output, version)
        s["uncertainty"]["confidence_reads_as"] = reads_as(s["strategy"])
        # LLM-judge agreement, when judged
        from pipeline.judge.store import judge_summaries

        if judges := judge_summaries(output, version):
            s["judges"] = judges
    if as_json:
        print(json.dumps(s, indent=2))
        repeat_warnings(output, version, s["warnings"])
        return
    lab = s["labels"]
    rows = [
        ("solutions", f"{s['solutions']:,}"),
        ("steps", f"{s['steps']:,}"),
        ("positive / negative / unlabeled steps", f"{lab['positive']:,} / {lab['negative']:,} / {lab['unlabeled']:,}"),
        ("positive rate (labeled steps)", "n/a" if s["positive_rate"] is None else f"{s['positive_rate']:.1%}"),
        ("solutions with an error", f"{s['solutions_with_error']:,}"),
        ("first-error step (1 = first step): count",
         ", ".join(f"{int(k) + 1}: {v}" for k, v in s["first_error_histogram"].items()) or "-"),
        ("final answer correct", "n/a" if s["solution_correct_rate"] is None else f"{s['solution_correct_rate']:.1%}"),
        ("right answer, wrong process", f"{s['right_answer_wrong_process']:,}"),
        ("rollouts", f"{s['rollouts']:,}"),
        ("no final answer (counted incorrect)", _no_answer_text(s)),
        ("unreadable answer (counted incorrect)", _unreadable_text(s)),
        ("rollout tokens", f"{s['rollout_tokens']:,}"),
        ("rollouts per solution", "n/a" if s["rollouts_per_solution"] is None else f"{s['rollouts_per_solution']:.1f}"),
        ("steps of right-answer solutions with 0 of K reaching the answer", _dead_text(s.get("dead_right_prefixes"))),
        *_unreached_rows(s.get("unreached"), s["solutions"]),
        *_uncertainty_rows(s["uncertainty"]),
        *_judge_rows(s.get("judges") or []),
    ]
    print_table(f"{output} (version {s['version']}, strategy {s['strategy']}, K={s['k']})", rows)
    from pipeline.commands.advice import right_answer_wrong_process_reading, uncertainty_advice

    echo(f"right answer, wrong process: {right_answer_wrong_process_reading(s)}")
    if advice := uncertainty_advice(s["uncertainty"], s):
        echo(f"uncertain labels: {advice}")
    repeat_warnings(output, version, s["warnings"])


def _unreached_rows(u: dict | None, n: int) -> list[tuple[str, str]]:
    # how much of the corpus the completer could not reach, and what that does to the labels (docs/labels.md,
    # "Reach gating")
    if not u or not n:
        return []
    out = []
    if u["gated"]:
        r = u["rows"]
        out.append(("unreached (0 of K at every probed prefix and the bare problem if drawn)",
                    f"{r:,} of {u['gated']:,} ({r / u['gated']:.1%}; {u['right_answer']:,} with a right answer): "
                    "no claim about their steps (label_status unreached); mcprm train leaves them out by default"))
    if u["first_step_probed"]:
        d, p = u["first_step_dead"], u["first_step_probed"]
        what = ("" if u["gated"] else ": on these every Monte Carlo label reads 'step 1 is wrong' whatever the "
                "steps say (label with --reach-gate to mark them)")
        out.append(("solutions whose step 1 had 0 of K", f"{d:,} of {p:,} probed ({d / p:.1%}){what}"))
    return out


def _dead_text(d: dict | None) -> str:
    # the completer's misses on prefixes that do lead to the answer: a high share says it is too weak for the set
    if d is None:
        return "n/a (right answers trusted, no rollouts)"
    return f"{d['dead']:,} of {d['probed']:,} probed ({d['rate']:.1%}), in {d['solutions']:,} solutions"


def _no_answer_text(s: dict) -> str:
    if s.get("no_answer") is None:
        return "n/a (older schema)"
    rate = "" if s.get("no_answer_rate") is None else f" ({s['no_answer_rate']:.1%} of rollouts)"
    return f"{s['no_answer']:,}{rate}"


def _unreadable_text(s: dict) -> str:
    if s.get("unreadable") is None:
        return "n/a (written before schema 4)"
    rate = "" if s.get("unreadable_rate") is None else f" ({s['unreadable_rate']:.1%} of counted continuations)"
    return f"{s['unreadable']:,}{rate}"


def _uncertainty_rows(u: dict) -> list[tuple[str, str]]:
    """How many labels are uncertain (their 95% interval straddles the threshold) and the mean
    first-error confidence; n/a for a corpus written before schema 3 (it stores neither)."""
    label = f"uncertain labels (95% interval straddles {u['threshold']:g})"
    if u["uncertain_steps"] is None:
        return [(label, "n/a (written before schema 3)"),
                ("first-error confidence: mean / rows below 0.5", "n/a (written before schema 3)")]
    rate = "" if u["uncertain_rate"] is None else f" ({u['uncertain_rate']:.1%})"
    conf = "n/a" if u["mean_first_error_confidence"] is None else f"{u['mean_first_error_confidence']:.3f}"
    reading = (("a ranking; close to a probability, overconfident near 1" if u.get("confidence_reads_as", "")
                .startswith("ranking, close") else "a ranking, not a probability (this strategy's few probes a "
                "row make it overconfident)") + "; docs/labels.md")
    return [(label, f"{u['uncertain_steps']:,} of {u['sampled_labeled_steps']:,} sampled steps{rate}"),
            ("first-error confidence: mean / rows below 0.5", f"{conf} / {u['low_confidence_rows']:,}"),
            ("first-error confidence reads as", reading)]


def _judge_rows(judges: list[dict]) -> list[tuple[str, str]]:
    """Each judge's agreement with MC on the first error, and its unparseable replies."""
    out = []
    for j in judges:
        rate = "n/a" if j["agreement_rate"] is None else f"{j['agreement_rate']:.1%}"
        out.append((f"judge {j['judge_id']}: agreement with MC / judged / unparseable",
                    f"{rate} / {j['judged']:,} of {j['rows']:,} / {j['unparseable']:,}"))
    return out
