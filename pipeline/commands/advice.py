"""What a number of ``stats``, ``report`` and ``eval`` can and cannot show, and what to do when it is bad: said in
one place so the table, the page and the command line say the same.

* "right answer, wrong process": 0 by construction where right answers are trusted (the default); elsewhere it
  counts the completer's misses as well as real wrong processes.
* uncertain labels: most intervals straddling the threshold means K continuations cannot tell the steps apart.
* Brier no better than always saying 0.5: ``mc_value`` measures the completer, not the step.
"""

from __future__ import annotations

UNCERTAIN_SHARE = 0.5  # above this share of uncertain labels, the advice is given
ALWAYS_HALF_BRIER = 0.25  # the Brier score of always saying 0.5


def right_answer_wrong_process_reading(stats: dict) -> str:
    """What the "right answer, wrong process" count can show under the corpus's strategy and trust setting."""
    strategy = stats.get("strategy")
    if strategy == "prm":  # a scored corpus (mcprm score): the PRM's own labels
        return ("right answers in which the PRM finds an error: the PRM's view, not a measurement of the process")
    if stats.get("trust_correct"):
        return ("0 by construction: this corpus trusts a right final answer (all its steps positive, no rollouts), "
                "so it cannot show a wrong process behind a right answer, and is not comparable with the 5-43% "
                "Qwen's PRM study reports. To measure it, label with --no-trust-correct (rollouts on right answers "
                "too)")
    how = {"per-step": "every step's own K continuations",
           "binary-search": "the bisection's probes (a right answer is searched as if its end were dead)",
           "adaptive": "the adaptive design's probes"}.get(str(strategy), "the strategy's continuations")
    return (f"right answers with a step from which no continuation reached the answer ({how}): real wrong "
            "processes and the completer's misses alike (a weak model fails from a correct prefix too; see the "
            "steps of right-answer solutions with 0 of K reaching the answer), so an upper bound, to compare "
            "with Qwen's 5-43% only for a completer that rarely misses")


def uncertainty_advice(u: dict, stats: dict) -> str | None:
    """What a large share of uncertain labels (95% interval straddling the threshold) means and what to do, or
    None below :data:`UNCERTAIN_SHARE`."""
    rate = u.get("uncertain_rate")
    if rate is None or rate <= UNCERTAIN_SHARE:
        return None
    t = u.get("threshold")
    k = stats.get("k")
    what = (f"{rate:.0%} of the sampled labels are uncertain: their draws cannot say whether the step's success "
            f"rate is above or below {t:g}, which the threshold and soft rules and mc_value read. A hard label "
            "is not this: a step with one continuation that reached the answer is alive for sure. ")
    if stats.get("strategy") == "binary-search":
        how = ("Binary-search stops a probe at its first success (--early-stop, the default), so a live step's "
               "interval is wide by design; for values to trust, label with --no-early-stop or --strategy "
               f"per-step, and a larger --k (now {k})")
    else:
        how = (f"Raise --k (now {k}; an interval narrows as 1/sqrt(K)), or use --strategy adaptive with "
               "--confidence-width W (samples until each interval is narrower than W)")
    return what + how + ("; where few continuations reach the answer at all, the model is too weak for these "
                         "problems: use a stronger --model (docs/labels.md)")


def brier_advice(brier: float | None) -> str | None:
    """What to do when the Brier score is no better than always saying 0.5, else None."""
    if brier is None or brier < ALWAYS_HALF_BRIER:
        return None
    return ("mc_value estimates whether the completer reaches the answer from a prefix, not whether the step is "
            "right: a completer that often fails from correct prefixes scores no better than a coin. Judge the "
            "labels by the first-error F1 instead, and for better values use a stronger --model (it completes "
            "correct prefixes) or a larger --k")
