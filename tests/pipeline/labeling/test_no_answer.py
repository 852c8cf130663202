"""Issue 12: a continuation with no final answer counts as incorrect (and in ``mc_no_answer``), never as
ungradable; corpora of the older schema stay readable and are never mixed with the new one."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from graders import Verdict
from pipeline.config import ConfigError, LabelConfig
from pipeline.corpus import corpus_stats, read_corpus
from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
from pipeline.labeling.strategies import ProbeResult, StrategyParams, make_strategy
from pipeline.solution import LabeledSolution, Solution, StepStats
from pipeline.storage.schema import SCHEMA_VERSION, arrow_schema, to_table
from pipeline.storage.store import CorpusStore
from rollouts.base import BackendStats, Completion

RIGHT, WRONG, RAMBLE, UNDECIDED = "The answer is \\boxed{GOLD}.", "The answer is \\boxed{WRONG}.", "so then...", "?!"


def fake_grade(pairs):
    """A grader with the verdict shapes of graders.grade_batch (no sympy needed)."""
    out = []
    for _gold, r in pairs:
        if r.endswith(RIGHT):
            out.append(Verdict(True, "string match", "GOLD"))
        elif r.endswith(WRONG):
            out.append(Verdict(False, "mismatch", "WRONG"))
        elif r.endswith(UNDECIDED):
            out.append(Verdict(None, "timeout", "?!"))
        else:
            out.append(Verdict(False, "no answer found", None))
    return out


class Scripted:
    """Draw j from prefix i returns script[i][j] (steps counted from the prompt)."""

    name = "scripted"

    def __init__(self, script):
        self.script = script
        self.stats = BackendStats()

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            step = r.prompt.split("Solution:\n", 1)[1].count("\n") - 1
            out.append([Completion(t, 7) for t in self.script[step][: r.n]])
        return out

    def encode_prompt(self, prompt):  # no token ids are returned, so nothing is ever reused
        return list(prompt.encode())

    def close(self):
        pass


class Plain:
    def prefix(self, problem, steps):
        return f"Problem: {problem}\nSolution:\n" + "".join(s + "\n" for s in steps)


SCRIPT = {0: [RIGHT, RAMBLE, UNDECIDED, WRONG], 1: [RAMBLE] * 4, 2: [UNDECIDED] * 4}
SOL = Solution(id="s", problem="p", answer="GOLD", steps=("a", "b", "c", "and that is all"))


def test_scheduler_counts_no_answer_as_incorrect():
    sched = Scheduler(Scripted(SCRIPT), fake_grade, Plain(),
                      SchedulerSettings("per-step", StrategyParams(k=4)))
    (o,) = sched.label([SOL])
    st = o.stats
    assert [s.total for s in st] == [4, 4, 4, 0]
    assert [s.correct for s in st] == [1, 0, 0, 0]
    assert [s.no_answer for s in st] == [1, 4, 0, 0]
    assert [s.ungradable for s in st] == [1, 0, 4, 0]
    assert st[0].value == pytest.approx(1 / 3)  # correct / (total - ungradable): the no-answer one is a failure
    assert st[1].value == 0.0  # all without an answer: a dead prefix, not "no evidence"
    assert st[2].value is None
    # The solution's own text has no final answer: it did not reach the gold answer.
    assert o.solution_correct is False
    assert o.labels == [True, False, None, False] and o.first_error == 1
    assert sched.stats.no_answer == 5 and sched.stats.ungradable == 5 and sched.stats.rollouts == 12

    row = to_table([o], 4).to_pylist()[0]
    assert row["mc_no_answer"] == [1, 4, 0, 0] and row["mc_ungradable"] == [1, 0, 4, 0]
    assert row["mc_correct"] == [1, 0, 0, 0] and row["mc_total"] == [4, 4, 4, 0]
    assert row["mc_value"][:3] == [pytest.approx(1 / 3), 0.0, None]


def test_no_answer_with_a_null_verdict_is_still_incorrect():
    """A (third-party) grader that still says None for "no answer found" is not taken as ungradable."""

    def old_style(pairs):
        return [Verdict(None, "no answer found", None) if v.no_answer else v for v in fake_grade(pairs)]

    sched = Scheduler(Scripted(SCRIPT), old_style, Plain(),
                      SchedulerSettings("per-step", StrategyParams(k=4)))
    (o,) = sched.label([SOL])
    assert [s.no_answer for s in o.stats] == [1, 4, 0, 0]
    assert [s.ungradable for s in o.stats] == [1, 0, 4, 0]
    assert o.solution_correct is False and o.labels[1] is False


@pytest.mark.parametrize("strategy", ["binary-search", "adaptive"])
def test_strategies_sum_no_answer(strategy):
    gen = make_strategy(strategy, 3, False, StrategyParams(k=4, wave_size=2))
    probes = next(gen)
    try:
        while True:
            probes = gen.send([ProbeResult(p.step, p.n, 0, 0, 5 * p.n, no_answer=p.n) for p in probes])
    except StopIteration as stop:
        oc = stop.value
    assert oc.first_error == 0 and oc.labels[0] is False
    assert oc.stats[0].no_answer == oc.stats[0].total == 4 and oc.stats[0].value == 0.0


def test_worker_reports_no_answer(tmp_path):
    from pipeline.execution.shard_worker import ShardWorker

    w = ShardWorker(LabelConfig(output=str(tmp_path / "out"), k=4, strategy="per-step"), backend=Scripted(SCRIPT))
    w.grade = fake_grade
    res = w.process(1, 0, [SOL])
    assert res["no_answer"] == 5 and res["ungradable"] == 5 and res["rollouts"] == 12
    t = CorpusStore(str(tmp_path / "out")).read_table(res["path"])
    assert t.schema.names == arrow_schema().names
    assert t.schema.metadata[b"mcprm_schema_version"] == str(SCHEMA_VERSION).encode()
    assert t.column("mc_no_answer").to_pylist() == [[1, 4, 0, 0]]


def _labeled(no_answer=(0, 3, 0)):
    stats = [StepStats(total=4, correct=1, no_answer=no_answer[0]), StepStats(total=4, no_answer=no_answer[1]),
             StepStats()]
    sol = Solution(id="a", problem="p", answer="1", steps=("x", "y", "z"))
    return LabeledSolution(sol, [True, False, False], stats, 1, False, rollouts=8, rollout_tokens=80,
                           strategy="per-step")


def _old_table(labeled):
    """A shard as schema version 1 wrote it: no mc_no_answer column."""
    t = to_table(labeled, 4)
    t = t.drop_columns(["mc_no_answer"])
    return t.replace_schema_metadata({b"mcprm_schema_version": b"1"})


def _commit(out, table, schema_version, identity="x"):
    store = CorpusStore(str(out))
    store.write_table("data/v00001/part-00000.parquet", table)
    store.commit({"version": 1, "schema_version": schema_version, "identity": identity, "strategy": "per-step",
                  "k": 4, "shards": [{"path": "data/v00001/part-00000.parquet", "rows": table.num_rows}],
                  "history": [{"version": 1}]})


def test_stats_report_no_answer(tmp_path):
    from cli.main import app

    _commit(tmp_path / "c", to_table([_labeled(), _labeled((1, 0, 0))], 4), SCHEMA_VERSION)
    s = corpus_stats(str(tmp_path / "c"))
    assert s["no_answer"] == 4 and s["rollouts"] == 16 and s["no_answer_rate"] == pytest.approx(0.25)
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert "no final answer" in res.output and "25.0% of rollouts" in res.output
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "c"), "--json"])
    assert json.loads(res.output)["no_answer"] == 4


def test_old_schema_corpus_is_readable(tmp_path):
    from cli.main import app

    _commit(tmp_path / "old", _old_table([_labeled()]), 1)
    t = read_corpus(str(tmp_path / "old"))
    assert t.num_rows == 1 and "mc_no_answer" not in t.column_names
    s = corpus_stats(str(tmp_path / "old"))
    assert s["no_answer"] is None and s["no_answer_rate"] is None and s["rollouts"] == 8
    res = CliRunner().invoke(app, ["stats", str(tmp_path / "old")])
    assert res.exit_code == 0, res.output
    assert "n/a (older schema)" in res.output


def test_refresh_of_an_old_schema_corpus_is_refused(tmp_path):
    from pipeline.bundled import SAMPLE_PATH
    from pipeline.run import label

    inp = tmp_path / "in.jsonl"
    inp.write_text(SAMPLE_PATH.read_text().splitlines()[0] + "\n")
    cfg = LabelConfig(input=[str(inp)], output=str(tmp_path / "old"), k=1, max_new_tokens=8, executor="local",
                      progress=False)
    _commit(tmp_path / "old", _old_table([_labeled()]), 1, identity=cfg.resolved().identity())
    with pytest.raises(ConfigError, match=r"schema version 1.*mc_no_answer.*--overwrite"):
        label(cfg)
    assert CorpusStore(str(tmp_path / "old")).manifest()["version"] == 1  # nothing written

    cfg.overwrite = True
    res = label(cfg)
    assert res.version == 2 and res.added == 1 and res.reused == 0
    assert res.manifest["schema_version"] == SCHEMA_VERSION
    assert [s["path"].split(".", 1)[0] for s in res.manifest["shards"]] == ["data/v00002/part-00000"]
    t = read_corpus(str(tmp_path / "old"))
    assert t.schema.equals(arrow_schema(), check_metadata=False) and t.num_rows == 1
    assert read_corpus(str(tmp_path / "old"), version=1).num_rows == 1  # the old version stays readable


def test_resume_relabels_a_shard_of_an_older_schema(tmp_path):
    """An unfinished run by an older mcprm left a shard without mc_no_answer: it is labeled again."""
    from pipeline.bundled import SAMPLE_PATH
    from pipeline.input import InputSpec
    from pipeline.run import label
    from tests.input_files import iter_solutions

    inp = tmp_path / "in.jsonl"
    inp.write_text(SAMPLE_PATH.read_text().splitlines()[0] + "\n")
    out = tmp_path / "out"
    cfg = LabelConfig(input=[str(inp)], output=str(out), k=1, max_new_tokens=8, executor="local", progress=False)
    (sol,) = iter_solutions(InputSpec(paths=(str(inp),)))
    store = CorpusStore(str(out))
    store.write_json("data/v00001/_plan.json", {"identity": cfg.resolved().identity(), "version": 1,
                                                "shard_size": cfg.shard_size, "shards": [{"shard": 0, "keys": [sol.key]}]})
    old = _labeled()
    old.solution = sol
    store.write_table("data/v00001/part-00000.parquet", _old_table([old]))
    res = label(cfg)
    assert res.shards_resumed == 0 and res.shards_run == 1
    assert "mc_no_answer" in read_corpus(str(out)).column_names


def test_arrow_schema_has_no_answer_after_ungradable():
    names = arrow_schema().names
    assert names.index("mc_no_answer") == names.index("mc_ungradable") + 1
    assert arrow_schema().field("mc_no_answer").type == pa.list_(pa.int32())
