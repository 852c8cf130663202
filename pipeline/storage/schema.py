"""The declared Parquet schema of a labeled corpus (one row per solution) and the row builder.

Every shard is cast to :data:`SCHEMA`; it is never inferred. ``prompt``/``completions``/``labels`` make a
shard load as-is as TRL stepwise supervision (``prompt`` = the problem, ``completions`` = the steps); the
``mc_*`` lists hold the Monte Carlo counts behind each label. Lists are per step and always have
``len(steps)`` entries; ``labels`` and ``mc_value`` are null where a strategy did not label/estimate a step.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.labeling.last_step import last_step_value
from pipeline.labeling.types import LabeledSolution

# 2: mc_no_answer added; a continuation with no final answer counts as incorrect (in version 1 it was
#    ungradable and left out of mc_value). Corpora of different versions are never mixed (pipeline.run).
# 3: uncertainty (issue 16): mc_low / mc_high (95% Wilson interval of each step's success probability),
#    first_error_confidence and label_status (pipeline.labeling.rules); older corpora stay readable.
SCHEMA_VERSION = 3

# columns each schema version added (readers of an older corpus leave them out: pipeline.storage.integrity)
ADDED_IN = {"mc_no_answer": 2, "mc_low": 3, "mc_high": 3, "first_error_confidence": 3, "label_status": 3}

_FIELDS = [
    ("id", "string", False),
    ("key", "string", False),  # content key (problem, answer, steps): the identity used by resume/refresh
    ("problem", "string", False),
    ("answer", "string", False),
    ("steps", "list<string>", False),
    ("prompt", "string", False),
    ("completions", "list<string>", False),
    ("labels", "list<bool>", False),
    ("mc_correct", "list<int32>", False),
    ("mc_total", "list<int32>", False),
    ("mc_ungradable", "list<int32>", False),
    ("mc_no_answer", "list<int32>", False),
    ("mc_value", "list<float32>", False),
    ("mc_low", "list<float32>", False),  # 95% Wilson interval of the success probability; null: not estimated
    ("mc_high", "list<float32>", False),
    ("first_error", "int32", False),
    ("first_error_confidence", "float32", True),  # pipeline.labeling.rules.first_error_confidence
    ("label_status", "string", True),  # sequential: decided | budget | exhausted, ",tie" appended on a tie
    ("solution_correct", "bool", True),
    ("rollouts", "int64", False),
    ("rollout_tokens", "int64", False),
    ("strategy", "string", False),
    ("k", "int32", False),
    ("source", "string", True),
]


def arrow_schema():
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "list<string>": pa.list_(pa.string()),
        "list<bool>": pa.list_(pa.bool_()),
        "list<int32>": pa.list_(pa.int32()),
        "list<float32>": pa.list_(pa.float32()),
        "int32": pa.int32(),
        "float32": pa.float32(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
    }
    return pa.schema(
        [pa.field(name, types[t], nullable=nullable) for name, t, nullable in _FIELDS],
        metadata={b"mcprm_schema_version": str(SCHEMA_VERSION).encode()},
    )


COLUMNS = [name for name, _, _ in _FIELDS]


def to_record(ls: LabeledSolution, k: int) -> dict:
    from pipeline.labeling.rules import StepCount, first_error_confidence, wilson

    s = ls.solution
    mc_value = []
    for i, st in enumerate(ls.stats):
        mc_value.append(last_step_value(st, ls.solution_correct) if i == len(ls.stats) - 1 else st.value)
    ivs = [wilson(st.correct, st.graded) for st in ls.stats]
    counts = [StepCount(st.correct, st.graded, v, lab) for st, v, lab in zip(ls.stats, mc_value, ls.labels)]
    return {
        "id": s.id,
        "key": s.key,
        "problem": s.problem,
        "answer": s.answer,
        "steps": list(s.steps),
        "prompt": s.problem,
        "completions": list(s.steps),
        "labels": list(ls.labels),
        "mc_correct": [st.correct for st in ls.stats],
        "mc_total": [st.total for st in ls.stats],
        "mc_ungradable": [st.ungradable for st in ls.stats],
        "mc_no_answer": [st.no_answer for st in ls.stats],
        "mc_value": mc_value,
        "mc_low": [None if iv is None else iv[0] for iv in ivs],
        "mc_high": [None if iv is None else iv[1] for iv in ivs],
        "first_error": ls.first_error,
        "first_error_confidence": first_error_confidence(counts, ls.first_error),
        "label_status": ls.extra.get("label_status"),
        "solution_correct": ls.solution_correct,
        "rollouts": ls.rollouts,
        "rollout_tokens": ls.rollout_tokens,
        "strategy": ls.strategy,
        "k": k,
        "source": s.source or None,
    }


def to_table(labeled: Sequence[LabeledSolution], k: int):
    import pyarrow as pa

    records = [to_record(ls, k) for ls in labeled]
    schema = arrow_schema()
    return pa.Table.from_pylist(records, schema=schema)


def check_table(table, where: str) -> None:
    """Raise ValueError if ``table`` does not have exactly the corpus schema (e.g. a foreign file)."""
    expected = arrow_schema()
    got = table.schema
    missing = [n for n in expected.names if n not in got.names]
    if missing:
        raise ValueError(f"{where}: not an mcprm shard, columns missing: {', '.join(missing)}")
