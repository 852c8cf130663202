"""Issue 25 item 11: messages name steps as users count them (step 1 is the first step), as input validation
and the report do; the data's index columns (first_error) stay 0-based and are said to be."""

from __future__ import annotations

import pyarrow as pa

from pipeline.bundled.synthetic import check_steps
from pipeline.storage.integrity import check_labels

PROBLEM = "Compute (23 + 17) * 3 - 48 / 6."


def test_synthetic_checker_names_the_wrong_step_from_1():
    r = check_steps(PROBLEM, ["23 + 17 = 40", "so we get forty"])
    assert r.first_error == 1  # the index, 0-based
    assert r.reason.startswith("step 2: not a step"), r.reason
    r = check_steps(PROBLEM, ["23 + 18 = 41"])
    assert r.first_error == 0 and r.reason.startswith("step 1: "), r.reason


def _rows(**change):
    row = dict(key="k1", steps=["a", "b", "c"], labels=[True, False, False], mc_correct=[2, 0, 0],
               mc_total=[2, 2, 0], mc_ungradable=[0, 0, 0], mc_value=[1.0, 0.0, None], first_error=1,
               mc_no_answer=[0, 1, 0])
    row.update(change)
    return pa.Table.from_pylist([row])


def test_label_invariant_messages_name_steps_from_1():
    assert check_labels(_rows(), "s.parquet") == []
    (msg,) = check_labels(_rows(mc_value=[1.0, 1.5, None]), "s.parquet")
    assert "step 2: mc_value 1.5 outside [0, 1]" in msg, msg
    (msg,) = check_labels(_rows(mc_correct=[3, 0, 0]), "s.parquet")
    assert "step 1: mc_correct 3" in msg, msg
    (msg,) = check_labels(_rows(first_error=0), "s.parquet")
    assert "first_error 0 (0-based: step 1) is not a negative step" in msg, msg
    (msg,) = check_labels(_rows(first_error=7), "s.parquet")
    assert "first_error 7 (0-based: no step of the 3) is not a negative step" in msg, msg
