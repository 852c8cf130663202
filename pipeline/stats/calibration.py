"""How true a stated probability is against known answers: expected calibration error and AUROC.

Both take the rows' stated probabilities (``first_error_confidence``) and whether each row's claim was right
(its first error is the reference's). ECE asks "is 0.8 right 80% of the time"; AUROC asks only "are right rows
stated higher than wrong ones", which is what a confidence that is not calibrated can still be used for
(ranking rows, ``--min-confidence``)."""

from __future__ import annotations

from collections.abc import Sequence


def ece(stated: Sequence[float], right: Sequence[bool], bins: int = 5) -> float | None:
    """Expected calibration error over ``bins`` equal-width bins of the stated probability: the row-weighted
    mean of |mean stated - share right| per bin. None without rows. A perfectly calibrated confidence still
    shows a positive ECE on finitely many rows (about 0.02 on 400 rows spread over the bins)."""
    sums = [[0, 0.0, 0] for _ in range(bins)]
    for p, ok in zip(stated, right):
        b = sums[min(bins - 1, max(0, int(p * bins)))]
        b[0] += 1
        b[1] += p
        b[2] += bool(ok)
    n = sum(b[0] for b in sums)
    return sum(abs(b[1] - b[2]) for b in sums) / n if n else None


def auroc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """The probability that a random right row scores above a random wrong one (ties count half): 0.5 for a
    score that says nothing, 1.0 for one that separates them. None unless both kinds are present. Exact
    (Mann-Whitney U from mid-ranks), O(n log n)."""
    pairs = sorted(zip(scores, right), key=lambda x: x[0])
    pos = sum(bool(ok) for _s, ok in pairs)
    neg = len(pairs) - pos
    if not pos or not neg:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid_rank = (i + 1 + j) / 2  # ranks i+1..j share their mean
        rank_sum += mid_rank * sum(bool(ok) for _s, ok in pairs[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
