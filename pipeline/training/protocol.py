"""The PRM evaluation protocol: how a scored corpus's ``prm_score`` is measured against reference step labels,
so that two PRMs' numbers can be compared and a number read on one set of solutions says something about another.

For one scored corpus (:func:`measure`), from ``prm_score`` alone (never the stored labels, which
``--use-answer-key`` may have set from the gold answer):

* ``step_auroc``: the probability that a random reference-correct step scores above a random reference-wrong one
  (ties half), over the steps up to and including the reference's first error (the steps after it have no
  reference label) that have a score. Needs no threshold.
* ``f1_at_0.5``: ProcessBench's first-error F1 with the first step below 0.5 as the predicted error.
* ``f1_own``: the same at the PRM's own threshold (the one its training chose; the scored corpus's manifest).
* ``f1_cross``: a threshold searched on one half of the problems (by a hash of the problem text, fixed, so the
  halves are the same in every run and for every PRM) and read on the other half, both ways; ``f1_cross`` is
  the mean of the two read halves' F1. What a threshold tuned on data like this, but not on these solutions,
  gives.
* ``f1_oracle``: at the threshold best on all these solutions themselves: an optimistic bound, not a result.

For two scored corpora of the same solutions (:func:`paired`), the differences of those numbers with a
bootstrap interval: problems are resampled with replacement (a problem's solutions and steps go together, so
the interval holds when one problem has several solutions), and the same resample is applied to both PRMs, so
the noise the two share cancels. The thresholds are held at the values chosen on the full data (the
interval does not include the threshold search's own variability for ``f1_cross``). ``seed`` fixes the
resamples.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.errors import FatalError
from pipeline.training.metrics import choose_threshold, first_error_at, first_error_f1


class ProtocolError(FatalError, ValueError):
    """The two scored corpora cannot be compared as given; the message says why."""


@dataclass(frozen=True)
class Scored:
    """One solution as the protocol sees it: the PRM's step scores and the reference's labels."""

    id: str
    problem: str
    scores: Sequence[float | None]  # P(step good) per step; None: not scored (cut by max length)
    truth: int  # the reference's first error, -1: none
    step_ok: Sequence[bool | None] | None = None  # the reference per step, None after its first error


HALF_SALT = b"mcprm-eval-half\0"  # a salt apart from training's split hash, so the halves do not follow it


def half_of(problem: str) -> int:
    """0 or 1: the problem's half for the cross-fitted threshold, by a hash of its text (stripped)."""
    return hashlib.sha256(HALF_SALT + problem.strip().encode("utf-8")).digest()[0] & 1


def _step_ok(s: Scored) -> list[bool | None]:
    if s.step_ok is not None and len(s.step_ok) == len(s.scores):
        return list(s.step_ok)
    fe = s.truth
    return [None if (fe != -1 and i > fe) else (i != fe) for i in range(len(s.scores))]


def step_pairs(sols: Sequence[Scored]) -> tuple[list[float], list[bool], list[int]]:
    """(scores, reference good, solution index) of every step with both a score and a reference label."""
    xs, ys, owner = [], [], []
    for i, s in enumerate(sols):
        for p, ok in zip(s.scores, _step_ok(s), strict=True):
            if p is None or ok is None:
                continue
            xs.append(float(p))
            ys.append(bool(ok))
            owner.append(i)
    return xs, ys, owner


def step_auroc(sols: Sequence[Scored]) -> float | None:
    from pipeline.stats.calibration import auroc

    xs, ys, _ = step_pairs(sols)
    return auroc(xs, ys)


def f1_at(sols: Sequence[Scored], threshold: float) -> dict:
    return first_error_f1([first_error_at(s.scores, threshold) for s in sols], [s.truth for s in sols])


def cross_fit(sols: Sequence[Scored], grid: Sequence[float] | None = None) -> dict:
    """The threshold searched (F1-best) on each half of the problems and read on the other (module doc)."""
    halves = [[s for s in sols if half_of(s.problem) == h] for h in (0, 1)]
    out = []
    for h in (0, 1):
        fit, read = halves[h], halves[1 - h]
        fit_truth = [s.truth for s in fit]
        if not read or not any(t == -1 for t in fit_truth) or not any(t != -1 for t in fit_truth):
            out.append({"chosen_on_half": h, "threshold": None, "f1": None, "chosen_on": len(fit),
                        "read_on": len(read)})
            continue
        t, _ = choose_threshold([s.scores for s in fit], fit_truth, grid)
        m = f1_at(read, t)
        out.append({"chosen_on_half": h, "threshold": t, "f1": m["f1"], "acc_error": m["acc_error"],
                    "acc_correct": m["acc_correct"], "chosen_on": len(fit), "read_on": len(read)})
    f1s = [x["f1"] for x in out if x["f1"] is not None]
    return {"f1": sum(f1s) / len(f1s) if len(f1s) == 2 else None, "halves": out}


def measure(sols: Sequence[Scored], own_threshold: float | None) -> dict:
    """The protocol's numbers of one scored corpus (module doc)."""
    half = f1_at(sols, 0.5)
    own = f1_at(sols, own_threshold) if own_threshold is not None else None
    best_t, best = choose_threshold([s.scores for s in sols], [s.truth for s in sols])
    cross = cross_fit(sols)
    xs, _ys, _ = step_pairs(sols)
    return {
        "solutions": len(sols), "solutions_with_error": sum(s.truth != -1 for s in sols), "steps_scored": len(xs),
        "step_auroc": step_auroc(sols),
        "f1_at_0.5": half["f1"], "acc_error_at_0.5": half["acc_error"], "acc_correct_at_0.5": half["acc_correct"],
        "own_threshold": own_threshold, "f1_own": own["f1"] if own else None,
        "acc_error_own": own["acc_error"] if own else None, "acc_correct_own": own["acc_correct"] if own else None,
        "f1_cross": cross["f1"], "cross_fit": cross["halves"],
        "f1_oracle": best["f1"], "oracle_threshold": best_t,
    }


# ------------------------------------------------------------------ paired bootstrap
class _Design:
    """One PRM's solutions laid out for weighted statistics: a bootstrap resample is a weight per problem
    (how many times it was drawn), every solution and step of a problem taking its weight."""

    def __init__(self, sols: Sequence[Scored], cluster: Sequence[int], thresholds: dict[str, float | None]):
        import numpy as np

        self.err = np.array([s.truth != -1 for s in sols], dtype=float)
        self.cluster = np.asarray(cluster, dtype=np.int64)
        self.hits = {}
        for name, t in thresholds.items():
            if t is None:
                continue
            self.hits[name] = np.array([first_error_at(s.scores, t) == s.truth for s in sols], dtype=float)
        xs, ys, owner = step_pairs(sols)
        order = np.argsort(np.asarray(xs, dtype=float), kind="stable")
        x = np.asarray(xs, dtype=float)[order]
        self.y = np.asarray(ys, dtype=float)[order]
        self.step_cluster = self.cluster[np.asarray(owner, dtype=np.int64)[order]] if len(xs) else np.zeros(0, int)
        # the first index of each run of equal scores: ties share their rank (counted half)
        self.starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]]) if len(x) else np.zeros(0, int)

    def f1(self, w, name: str):
        """F1 at threshold ``name`` under solution weights ``w`` (resamples x solutions)."""
        import numpy as np

        hit = self.hits[name]
        n_e, n_c = w @ self.err, w @ (1 - self.err)
        with np.errstate(invalid="ignore", divide="ignore"):
            ae = (w @ (hit * self.err)) / n_e
            ac = (w @ (hit * (1 - self.err))) / n_c
            f = np.where(ae + ac > 0, 2 * ae * ac / (ae + ac), 0.0)
        return np.where((n_e > 0) & (n_c > 0), f, np.nan)

    def auroc(self, wc):
        """Step AUROC under problem weights ``wc`` (resamples x problems)."""
        import numpy as np

        if not len(self.y):
            return np.full(wc.shape[0], np.nan)
        w = wc[:, self.step_cluster]
        pos = np.add.reduceat(w * self.y, self.starts, axis=1)
        neg = np.add.reduceat(w * (1 - self.y), self.starts, axis=1)
        below = np.cumsum(neg, axis=1) - neg
        num = (pos * (below + 0.5 * neg)).sum(axis=1)
        den = pos.sum(axis=1) * neg.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, np.nan)


def _match(a: Sequence[Scored], b: Sequence[Scored]) -> tuple[list[Scored], list[Scored]]:
    by_id = {s.id: s for s in b}
    left, right, missing = [], [], 0
    for s in a:
        t = by_id.get(s.id)
        if t is None:
            missing += 1
            continue
        if len(t.scores) != len(s.scores) or t.problem.strip() != s.problem.strip():
            raise ProtocolError(f"solution {s.id!r} has {len(s.scores)} steps in the first scored corpus and "
                                f"{len(t.scores)} in the second (or another problem): a paired comparison needs "
                                "both PRMs scored on the same solutions (`mcprm score` on one input file)")
        left.append(s)
        right.append(t)
    if not left:
        raise ProtocolError("the two scored corpora share no solution id: score the same input file with both PRMs")
    return left, right


def paired(a: Sequence[Scored], b: Sequence[Scored], own_a: float | None = None, own_b: float | None = None,
           n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """A minus B over the solutions both scored: each protocol number's difference, its bootstrap SE and
    ``level`` percentile interval (module doc). Solutions only one of them scored are left out and counted."""
    import numpy as np

    if n_boot < 100:
        raise ProtocolError(f"--bootstrap must be at least 100 resamples, got {n_boot}")
    if not 0 < level < 1:
        raise ProtocolError(f"the interval's level must be in (0, 1), got {level}")
    left, right = _match(a, b)
    problems: dict[str, int] = {}
    cluster = [problems.setdefault(s.problem.strip(), len(problems)) for s in left]
    ma, mb = measure(left, own_a), measure(right, own_b)
    ta = {"f1_at_0.5": 0.5, "f1_own": own_a, **_cross_thresholds(ma)}
    tb = {"f1_at_0.5": 0.5, "f1_own": own_b, **_cross_thresholds(mb)}
    da, db = _Design(left, cluster, ta), _Design(right, cluster, tb)
    rng = np.random.default_rng(seed)
    n_cl = len(problems)
    cl = np.asarray(cluster)
    draws: dict[str, list] = {k: [] for k in ("step_auroc", "f1_at_0.5", "f1_own", "f1_cross")}
    chunk = max(1, min(n_boot, 2_000_000 // max(1, len(da.y) + len(cluster))))
    done = 0
    while done < n_boot:
        m = min(chunk, n_boot - done)
        wc = np.stack([np.bincount(rng.integers(0, n_cl, n_cl), minlength=n_cl) for _ in range(m)]).astype(float)
        w = wc[:, cl]
        draws["step_auroc"].append(da.auroc(wc) - db.auroc(wc))
        for name in ("f1_at_0.5", "f1_own"):
            if name in da.hits and name in db.hits:
                draws[name].append(da.f1(w, name) - db.f1(w, name))
        if all(f"cross{h}" in da.hits and f"cross{h}" in db.hits for h in (0, 1)):
            # each half read at the threshold the other half chose, as f1_cross itself is
            half = np.array([half_of(s.problem) for s in left])
            diff = 0.0
            for h in (0, 1):
                wh = w * (half == 1 - h)
                diff = diff + (da.f1(wh, f"cross{h}") - db.f1(wh, f"cross{h}")) / 2
            draws["f1_cross"].append(diff)
        done += m
    out = {"solutions": len(left), "only_in_first": len(a) - len(left), "only_in_second": len(b) - len(right),
           "problems": n_cl, "bootstrap": n_boot, "seed": seed, "level": level, "first": ma, "second": mb,
           "differences": {}}
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    for name, parts in draws.items():
        point = None if ma[name] is None or mb[name] is None else ma[name] - mb[name]
        entry = {"difference": point, "se": None, "low": None, "high": None}
        if parts and point is not None:
            d = np.concatenate(parts)
            d = d[np.isfinite(d)]
            if len(d) >= 2:
                entry.update(se=float(d.std(ddof=1)), low=float(np.quantile(d, lo_q)),
                             high=float(np.quantile(d, hi_q)), resamples_used=int(len(d)))
        out["differences"][name] = entry
    return out


def _cross_thresholds(m: dict) -> dict:
    return {f"cross{x['chosen_on_half']}": x["threshold"] for x in m["cross_fit"]}

