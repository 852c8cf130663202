"""Best-of-N: N solutions per problem reranked by a PRM, against majority vote, a random pick and pass@N.

Input: a scored corpus (``mcprm score`` on ``mcprm generate``'s solutions: several solutions per problem, each
with its per-step ``prm_score`` and ``solution_correct`` graded against the gold answer). Solutions are grouped by
problem text, in corpus order; for each N the first N of each problem are used (problems with fewer are left
out of that N and counted).

Selectors (each picks one solution per problem; its accuracy is the share of problems whose pick is right):

* ``prm-min`` / ``prm-product`` / ``prm-last``: the solution with the highest minimum / product / last-step PRM
  probability (aggregations of Qwen2.5-Math-PRM / Math-Shepherd / ORM-style use);
* ``prm-vote``: PRM-weighted majority vote (each final answer scores the sum of its solutions' ``prm-min``);
* ``majority``: self-consistency, the most frequent final answer (answers equal by the grader are one answer;
  a tie counts the tied answers' mean correctness, the expectation of breaking it at random);
* ``random``: the expected accuracy of a uniformly random pick (the mean correctness of the N);
* ``pass@N``: some solution is right (the ceiling of any selector).

Standard errors are over problems (the per-problem outcomes' sample SD / sqrt(problems)); each PRM selector also
gets the paired difference with majority vote and its SE (same problems, so most of the noise cancels).
Ties between solutions' PRM scores go to the earlier solution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.errors import FatalError

SELECTORS = ("prm-min", "prm-product", "prm-last", "prm-vote", "majority", "random", "pass@N")
AGGREGATIONS = ("min", "product", "last")


class RerankError(FatalError, ValueError):
    pass


@dataclass
class Candidate:
    id: str
    scores: list[float]  # per-step PRM probabilities (steps without a score left out)
    correct: bool
    answer: str | None  # the final answer as extracted (None: none found)


def aggregate(scores: Sequence[float], how: str) -> float:
    """One number per solution from its step probabilities: ``min``, ``product`` or ``last``."""
    if not scores:
        return -math.inf
    if how == "min":
        return min(scores)
    if how == "product":
        return math.exp(sum(math.log(max(s, 1e-12)) for s in scores))
    if how == "last":
        return scores[-1]
    raise RerankError(f"unknown aggregation {how!r}; choose one of {', '.join(AGGREGATIONS)}")


def pick_prm(cands: Sequence[Candidate], how: str) -> float:
    best = max(range(len(cands)), key=lambda i: (aggregate(cands[i].scores, how), -i))
    return float(cands[best].correct)


def _vote(cands: Sequence[Candidate], clusters: Sequence[int], weights: Sequence[float]) -> float:
    """Accuracy of the answer cluster with the highest total weight (ties: the tied clusters' mean correctness;
    solutions without an answer do not vote). A cluster is right when its solutions are (they share an answer)."""
    total: dict[int, float] = {}
    right: dict[int, list[bool]] = {}
    for c, cl, w in zip(cands, clusters, weights, strict=True):
        if c.answer is None:
            continue
        total[cl] = total.get(cl, 0.0) + w
        right.setdefault(cl, []).append(c.correct)
    if not total:
        return 0.0
    top = max(total.values())
    tied = [cl for cl, w in total.items() if abs(w - top) <= 1e-12 * max(1.0, abs(top))]
    return sum(sum(right[cl]) / len(right[cl]) for cl in tied) / len(tied)


def outcomes(cands: Sequence[Candidate], clusters: Sequence[int]) -> dict[str, float]:
    """Each selector's outcome (1 right, 0 wrong, or an expectation) on one problem's candidates."""
    return {
        "prm-min": pick_prm(cands, "min"),
        "prm-product": pick_prm(cands, "product"),
        "prm-last": pick_prm(cands, "last"),
        "prm-vote": _vote(cands, clusters, [max(0.0, aggregate(c.scores, "min")) for c in cands]),
        "majority": _vote(cands, clusters, [1.0] * len(cands)),
        "random": sum(c.correct for c in cands) / len(cands),
        "pass@N": float(any(c.correct for c in cands)),
    }


def mean_se(xs: Sequence[float]) -> tuple[float | None, float | None]:
    n = len(xs)
    if n == 0:
        return None, None
    m = sum(xs) / n
    if n < 2:
        return m, None
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def answer_clusters(answers: Sequence[str | None], problem: str | None = None) -> list[int]:
    """Cluster ids of final answers: equal normalized strings first, then clusters the grader finds equal
    (``\\frac{6}{2}`` and ``3``) merged. No answer gets its own cluster (it never votes)."""
    from graders import normalize

    keys: list[str | None] = [None if a is None else normalize(a) for a in answers]
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    parent = {k: k for k in distinct}
    if len(distinct) > 1:
        from graders import grade_batch

        pairs = [(a, b) for i, a in enumerate(distinct) for b in distinct[i + 1:]]
        verdicts = grade_batch([(a, f"\\boxed{{{b}}}") for a, b in pairs], problems=[problem] * len(pairs))

        def find(x):
            while parent[x] != x:
                x = parent[x]
            return x

        for (a, b), v in zip(pairs, verdicts, strict=True):
            if v.correct is True:
                parent[find(b)] = find(a)
        roots = {k: find(k) for k in distinct}
    else:
        roots = {k: k for k in distinct}
    ids = {r: i for i, r in enumerate(dict.fromkeys(roots.values()))}
    out = []
    for j, k in enumerate(keys):
        out.append(ids[roots[k]] if k is not None else len(ids) + j)
    return out


@dataclass
class ProblemGroup:
    problem: str
    cands: list[Candidate]


def load_groups(corpus: str, version: int | None = None) -> tuple[list[ProblemGroup], dict]:
    """The scored corpus's solutions grouped by problem (corpus order). Rows with no gold answer grading
    (``solution_correct`` null) count as wrong and are counted in the notes."""
    from graders import extract_answer
    from pipeline.corpus import iter_corpus, open_manifest

    _, m = open_manifest(corpus, version)
    groups: dict[str, ProblemGroup] = {}
    notes = {"rows": 0, "ungraded": 0, "unscored": 0, "cut": 0, "strategy": m.get("strategy")}
    try:
        batches = list(iter_corpus(corpus, version, ["id", "problem", "steps", "prm_score", "solution_correct"]))
    except Exception as e:  # a labeled corpus of schema < 4 has no prm_score column
        raise RerankError(f"{corpus} has no prm_score column ({e}): best-of-N reranks a corpus written by "
                          "`mcprm score PRM --input SOLUTIONS --output OUT`") from None
    for b in batches:
        for r in b.to_pylist():
            notes["rows"] += 1
            ps = r["prm_score"]
            if ps is None:
                raise RerankError(f"{corpus} row {r['id']!r} has no prm_score: this is a labeled corpus, not a "
                                  "scored one. Score the solutions first: `mcprm score PRM --input SOLUTIONS "
                                  "--output OUT`")
            scores = [float(x) for x in ps if x is not None]
            if not scores:
                notes["unscored"] += 1
            elif len(scores) < len(ps):  # steps past the PRM's max length: ranked on its early steps only
                notes["cut"] += 1
            sc = r["solution_correct"]
            if sc is None:
                notes["ungraded"] += 1
            text = "\n".join(r["steps"])
            g = groups.setdefault(r["problem"], ProblemGroup(r["problem"], []))
            g.cands.append(Candidate(r["id"], scores, bool(sc), extract_answer(text)))
    if not groups:
        raise RerankError(f"{corpus} holds no solutions")
    if notes["ungraded"] == notes["rows"]:
        raise RerankError(f"{corpus}: no solution has a graded final answer (solution_correct is null for every "
                          "row): best-of-N needs the gold answers in the scored input (an 'answer' field)")
    return list(groups.values()), notes


PRM_SELECTORS = ("prm-min", "prm-product", "prm-last", "prm-vote")


def split_problems(groups: Sequence[ProblemGroup], fraction: float) -> tuple[list, list]:
    """(validation, held out): problems whose text hashes below ``fraction`` choose, the others are measured;
    the same hash as training's split (pipeline.training.targets.problem_group), so a problem is always on one
    side."""
    from pipeline.training.targets import problem_group

    val = [g for g in groups if problem_group(g.problem) < fraction]
    return val, [g for g in groups if problem_group(g.problem) >= fraction]


def best_of_n(corpus: str, ns: Sequence[int] | None = None, version: int | None = None,
              choose_fraction: float | None = None) -> dict:
    """Best-of-N accuracies of every selector for each N (default: the largest N every problem has, and the
    powers of two below it), with standard errors over problems.

    ``choose_fraction``: that share of the problems (by hash) chooses the PRM selector (the aggregation: min,
    product, last step or PRM-weighted vote) with the best accuracy at the largest N, and every number reported is
    measured on the other problems only, so the chosen selector's accuracy and its difference with majority vote
    are held out (``chosen``). Without it, picking the best of the four selectors from the table overstates it."""
    groups, notes = load_groups(corpus, version)
    chosen = None
    if choose_fraction is not None:
        if not 0 < choose_fraction < 1:
            raise RerankError(f"--choose-on must be in (0, 1), got {choose_fraction}")
        val, held = split_problems(groups, choose_fraction)
        if not val or not held:
            raise RerankError(f"--choose-on {choose_fraction}: {len(val)} validation and {len(held)} held-out "
                              "problems; both sides need problems (more problems, or another fraction)")
        n_top = min(len(g.cands) for g in groups)
        got = _table(val, [n_top])[0]["selectors"]
        chosen = {"selector": max(PRM_SELECTORS, key=lambda k: (got[k]["accuracy"] or 0.0, -PRM_SELECTORS.index(k))),
                  "n": n_top, "validation_problems": len(val), "held_out_problems": len(held),
                  "validation_accuracy": {k: got[k]["accuracy"] for k in PRM_SELECTORS}}
        groups = held
    out = _report(groups, notes, ns, corpus)
    if chosen:
        out["chosen"] = chosen
    return out


def _report(groups, notes, ns, corpus) -> dict:
    sizes = [len(g.cands) for g in groups]
    if not ns:
        top = min(sizes)
        ns = sorted({1 << i for i in range(int(math.log2(top)) + 1)} | {top})
    bad = [n for n in ns if n < 1]
    if bad:
        raise RerankError(f"--n must be at least 1, got {bad[0]}")
    results = _table(groups, ns)
    return {"corpus": corpus, "problems": len(groups), "solutions": sum(sizes),
            "solutions_per_problem": {"min": min(sizes), "max": max(sizes)}, "ungraded": notes["ungraded"],
            "unscored": notes["unscored"], "cut": notes["cut"], "results": results}


def _table(groups, ns) -> list[dict]:
    clusters = {id(g): answer_clusters([c.answer for c in g.cands], g.problem) for g in groups}
    results = []
    for n in ns:
        per: dict[str, list[float]] = {s: [] for s in SELECTORS}
        used = 0
        for g in groups:
            if len(g.cands) < n:
                continue
            used += 1
            got = outcomes(g.cands[:n], clusters[id(g)][:n])
            for s, v in got.items():
                per[s].append(v)
        row = {"n": n, "problems": used, "problems_too_few": len(groups) - used, "selectors": {}}
        for s in SELECTORS:
            m, se = mean_se(per[s])
            entry = {"accuracy": m, "se": se}
            if s.startswith("prm-") and per[s]:
                d, dse = mean_se([a - b for a, b in zip(per[s], per["majority"], strict=True)])
                entry.update(vs_majority=d, vs_majority_se=dse)
            row["selectors"][s] = entry
        results.append(row)
    return results
