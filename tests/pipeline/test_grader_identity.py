"""Issue 26: a label configuration records ``graders.grader_identity`` of the grader and options it grades with,
so that a grader policy that changes verdicts changes the corpus identity; under the default policies it is the
bare grader version, as every corpus written so far recorded it."""

from __future__ import annotations

import graders
from graders import GraderConfig, get_grader, grader_identity
from pipeline.config import LabelConfig
from pipeline.execution.shard_worker import grade_callable


def test_default_policies_record_the_bare_version():
    for name in ("sympy", "exact"):
        c = LabelConfig(model="m", grader=name)
        assert c.identity_dict()["grader_version"] == get_grader(name).version == grader_identity(name)
    assert grader_identity(get_grader("sympy"), GraderConfig(timeout_s=9.0, workers=3)) == get_grader("sympy").version


def test_the_identity_follows_the_grader_config_the_run_grades_with(monkeypatch):
    c = LabelConfig(model="m")
    before = c.identity()
    policy = GraderConfig(tuple_vs_set="differ")
    monkeypatch.setattr(LabelConfig, "grader_config", lambda self, workers=0: policy)
    recorded = c.identity_dict()["grader_version"]
    assert recorded == f"{get_grader('sympy').version}+tuple_vs_set=differ" == grader_identity("sympy", policy)
    assert c.identity() != before
    # and it is the config the worker's grade callable grades with
    assert grade_callable(c, 2).fn.keywords["config"] is policy


def test_the_worker_grades_with_the_run_options():
    cfg = grade_callable(LabelConfig(model="m", grader_timeout=7.0, grader="exact"), 3).fn
    assert cfg.keywords["grader"] == "exact"
    assert cfg.keywords["config"] == GraderConfig(timeout_s=7.0, workers=3)
    assert graders.grader_identity("exact", cfg.keywords["config"]) == get_grader("exact").version
