"""The declared Parquet schema of a labeled corpus (one row per solution) and the row builder.

Every shard is cast to :data:`SCHEMA`; it is never inferred. ``prompt``/``completions``/``labels`` make a
shard load as-is as TRL stepwise supervision (``prompt`` = the problem, ``completions`` = the steps); the
``mc_*`` lists hold the Monte Carlo counts behind each label. Lists are per step and always have
``len(steps)`` entries; ``labels`` and ``mc_value`` are null where a strategy did not label/estimate a step.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.solution import LabeledSolution, last_step_value

# 2: mc_no_answer added; a continuation with no final answer counts as incorrect (in version 1 it was
#    ungradable and left out of mc_value). Corpora of different versions are never mixed (pipeline.run).
# 3: uncertainty: mc_low / mc_high (95% Wilson interval of each step's success probability),
#    first_error_confidence and label_status (pipeline.labeling.rules); older corpora stay readable.
# 4: labels that tell the truth about themselves: an unreadable answer counts as a failure (in
#    mc_total, not mc_correct; was ungradable), mc_unreadable per step; mc_low/mc_high/mc_value follow the
#    sampling design (null where it cannot give them); first_error_confidence calibrated; a scored
#    corpora (mcprm score) carry prm_score. A refresh never mixes version 3 and 4 rows (pipeline.run).
SCHEMA_VERSION = 4

# columns each schema version added (readers of an older corpus leave them out: pipeline.storage.integrity)
ADDED_IN = {"mc_no_answer": 2, "mc_low": 3, "mc_high": 3, "first_error_confidence": 3, "label_status": 3,
            "mc_unreadable": 4, "mc_reused": 4, "mc_reused_correct": 4, "mc_design": 4, "first_error_posterior": 4,
            "mc_deep_correct": 4, "mc_deep_total": 4, "prm_score": 4}

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
    ("mc_unreadable", "list<int32>", False),  # of mc_total: answers the grader could not read (failures)
    ("mc_reused", "list<int32>", False),  # of mc_total: draws credited by rollout reuse
    ("mc_reused_correct", "list<int32>", False),  # of mc_correct: reused draws that succeeded
    # each graded continuation counted once, at the deepest prefix it reached (the independent draws the
    # first-error model reads: pipeline.stats.changepoint)
    ("mc_deep_correct", "list<int32>", False),
    ("mc_deep_total", "list<int32>", False),
    # the design's unbiased estimate of the success probability from the step's own draws (pipeline.stats.
    # intervals.estimate); null: no own draw (the last step: 1.0/0.0 from the solution's own answer)
    ("mc_value", "list<float32>", False),
    ("mc_low", "list<float32>", False),  # exact 95% interval for the design; null: no own draw
    ("mc_high", "list<float32>", False),
    ("mc_design", "string", True),  # fixed | first-success | first-wave (pipeline.stats.intervals.DESIGNS)
    ("first_error", "int32", False),
    ("first_error_confidence", "float32", True),  # posterior probability of first_error; null: no rollouts
    # posterior over the first error (index 0: none, i + 1: step i) under the model fitted to the whole
    # version (pipeline.storage.confidence; the manifest's ``first_error_model``): written into the shards a
    # run labeled at its commit and recomputed on read by read_corpus / iter_corpus / scan_corpus; null: no
    # rollouts (and in shard files written before the commit-time fill)
    ("first_error_posterior", "list<float32>", True),
    ("label_status", "string", True),  # sequential: decided | budget | exhausted (",tie" appended on a tie); --reach-gate: unreached | trusted | searched (pipeline.solution.REACH_STATUSES)
    ("solution_correct", "bool", True),
    ("rollouts", "int64", False),
    ("rollout_tokens", "int64", False),
    ("strategy", "string", False),
    ("k", "int32", False),
    ("source", "string", True),
    # a scored corpus's per-step PRM probabilities (mcprm score, pipeline.training.score); null: labeled
    ("prm_score", "list<float32>", True),
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


def to_record(ls: LabeledSolution, k: int, post: list[float] | None = None) -> dict:
    """One corpus row. ``post``: the row's first-error posterior where the caller has one (a shard leaves it
    null: the model is fitted to the whole version at commit, pipeline.storage.confidence)."""
    from pipeline.stats.intervals import FIXED, estimate

    s = ls.solution
    design = ls.extra.get("design", FIXED)
    wave = int(ls.extra.get("wave", 1))
    growth = float(ls.extra.get("growth", 1.0))
    last = len(ls.stats) - 1
    mc_value, lows, highs = [], [], []
    for i, st in enumerate(ls.stats):
        v, iv = estimate(design, st.own_correct, st.own_graded, st.first_correct, st.first_n, wave, growth)
        if i == last and st.own_total == 0:
            v = last_step_value(st, ls.solution_correct)
        mc_value.append(v)
        lows.append(None if iv is None else iv[0])
        highs.append(None if iv is None else iv[1])
    fe = ls.first_error
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
        "mc_unreadable": [st.unreadable for st in ls.stats],
        "mc_reused": [st.reused for st in ls.stats],
        "mc_reused_correct": [st.reused_correct for st in ls.stats],
        "mc_deep_correct": [st.deep_correct for st in ls.stats],
        "mc_deep_total": [st.deep_n for st in ls.stats],
        "mc_value": mc_value,
        "mc_low": lows,
        "mc_high": highs,
        "mc_design": design if ls.rollouts > 0 else None,
        "first_error": fe,
        "first_error_confidence": None if post is None or fe + 1 >= len(post) else post[fe + 1],
        "first_error_posterior": post,
        "label_status": ls.extra.get("label_status"),
        "prm_score": ls.extra.get("prm_score"),
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
