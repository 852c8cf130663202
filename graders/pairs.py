"""The one check of what a grader is handed: a (gold, response) pair or a (gold, response, problem) triple."""

from __future__ import annotations


def check_triple(i: int, pair) -> tuple[str, str, str | None]:
    """``(gold, response, problem)`` of a (gold, response) pair or a (gold, response, problem) triple."""
    try:
        if isinstance(pair, (tuple, list)) and len(pair) == 3:
            gold, response, problem = pair
        else:
            (gold, response), problem = pair, None
    except (TypeError, ValueError):
        raise TypeError(
            f"pair {i}: expected a (gold, response) or (gold, response, problem) tuple, got {type(pair).__name__}"
        ) from None
    if isinstance(gold, int) and not isinstance(gold, bool):
        gold = str(gold)
    if not isinstance(gold, str):
        raise TypeError(f"pair {i}: gold must be a string, got {type(gold).__name__} {gold!r:.60}")
    if not isinstance(response, str):
        raise TypeError(f"pair {i}: response must be a string, got {type(response).__name__}")
    if problem is not None and not isinstance(problem, str):
        raise TypeError(f"pair {i}: problem must be a string or None, got {type(problem).__name__}")
    return gold, response, problem


def check_pair(i: int, pair) -> tuple[str, str]:
    return check_triple(i, pair)[:2]
