"""A failure while the scheduler works on one solution is a typed SolutionFailure chained to its cause, and the
worker's message names that row from it (issue 27: no attribute attached to a foreign exception)."""

from __future__ import annotations

import pytest

from pipeline.execution.shard_worker import WorkerError
from pipeline.labeling.scheduler import SolutionFailure, blame
from pipeline.solution import Solution

SOLS = [Solution(f"s{i}", "p", "1", ("a", "b"), source=f"in.jsonl:{i}") for i in range(3)]


def _raise_in(sol, exc):
    with blame(sol):
        raise exc


def test_blame_wraps_the_exception_and_keeps_it_as_the_cause():
    cause = KeyError("x")
    with pytest.raises(SolutionFailure) as got:
        _raise_in(SOLS[1], cause)
    assert got.value.solution is SOLS[1] and got.value.__cause__ is cause
    assert str(got.value) == str(cause)


def test_the_innermost_solution_is_blamed():
    with pytest.raises(SolutionFailure) as got:
        with blame(SOLS[0]):
            _raise_in(SOLS[2], ValueError("bad"))
    assert got.value.solution is SOLS[2]


def test_the_worker_names_the_row_and_reports_the_cause():
    try:
        _raise_in(SOLS[1], ValueError("injected fault\nsecond line"))
    except SolutionFailure as e:
        w = WorkerError.from_exception(e, 0, SOLS)
    assert str(w) == ("a worker failed while labeling in.jsonl line 2 (solution id 's1', 2 steps): "
                      "ValueError: injected fault")
    assert "ValueError: injected fault" in w.detail and "SolutionFailure" in w.detail  # the whole chain
    try:
        raise ValueError("not one row's")
    except ValueError as e:
        w = WorkerError.from_exception(e, 4, SOLS[:1])
    assert str(w) == "a worker failed while labeling shard 4 (1 solutions, in.jsonl line 1): ValueError: not one row's"
