"""Issue 29 item 2: the Ray executor's engines start while the input is read and validated, not after. Real local
Ray, the bundled model, real files. What is checked is the order of the run's recorded events (never durations),
the labels (equal to the in-process reference run), and that an engine started for a run that then stops (a bad
row, nothing new to label, a model that does not load) is gone: this test process's own Ray actors of the
executor's class, read from Ray's actor table for this driver's job only."""

from __future__ import annotations

import json
import shutil

import pytest

from pipeline.corpus import read_corpus
from pipeline.execution.shard_worker import WorkerError
from pipeline.input import InputError
from pipeline.run import label

from .conftest import ROOT, invoke_mcprm, make_cfg, rows_by_key, wait_for


def _own_shard_actors() -> dict[str, str]:
    """State of every shard actor this process's Ray job made (actor id -> ALIVE, DEAD, ...), never another job's."""
    # the GCS actor table: Ray's state API proper needs the dashboard, which mcprm's Ray leaves off
    import ray
    from ray._private import state

    job = ray.get_runtime_context().get_job_id()
    return {aid: a["State"] for aid, a in state.actors().items()
            if a["JobID"] == job and a["ActorClassName"] == "ShardActor"}


@pytest.fixture
def own_ray():
    """This process's Ray (started as `label` starts it, or the one an earlier test started), and the shard actors
    it held before the test."""
    from pipeline.execution.ray_cluster import init_ray

    init_ray()
    return set(_own_shard_actors())


def _all_dead(ids: set[str]) -> bool:
    now = _own_shard_actors()
    return all(now.get(a) == "DEAD" for a in ids)


def _bad_input(small_input, tmp_path, bad_line: int) -> str:
    rows = [json.loads(x) for x in open(small_input).read().splitlines()]
    rows.insert(bad_line - 1, {"id": "no-steps", "problem": "What is 1 + 1?", "answer": "2"})
    p = tmp_path / "bad.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def test_engine_starts_while_the_input_is_read_and_labels_match(small_input, reference_run, tmp_path, own_ray):
    _, ref_res, ref = reference_run
    out = str(tmp_path / "out")
    res = label(make_cfg(small_input, out, executor="ray", num_workers=2))
    assert rows_by_key(read_corpus(out)) == ref
    th = res.manifest["throughput"]
    ev = th["startup_events"]  # seconds since the run began, from the driver's clock and the actors' own
    # a new corpus: the engine start was asked for before the input pass began (the pass runs while the actors
    # load), and the actors began loading after it was asked for (their own clock: same machine)
    assert ev["engine_started"] <= ev["input_started"] < ev["input_ended"], ev
    assert ev["engine_started"] <= ev["first_worker_started"] <= ev["first_worker_ready"], ev
    # the reported durations are these events' spans: the overlap is the engine start's part inside the input pass
    assert th["input_seconds"] == pytest.approx(ev["input_ended"] - ev["input_started"], abs=0.003)
    assert th["engine_start_seconds"] == pytest.approx(ev["first_worker_ready"] - ev["engine_started"], abs=0.003)
    hidden = max(0.0, min(ev["first_worker_ready"], ev["input_ended"]) - ev["input_started"])
    assert th["startup_overlap_seconds"] == pytest.approx(hidden, abs=0.003)
    assert 0 <= th["startup_overlap_seconds"] <= min(th["engine_start_seconds"], th["input_seconds"])
    # startup_seconds and labeling_seconds keep their meaning: the run's own wait for a worker, then labeling
    assert 0 <= th["startup_seconds"] <= th["seconds"]
    assert th["labeling_seconds"] == pytest.approx(th["seconds"] - th["startup_seconds"], abs=0.01)
    assert th["workers"] == 2
    started = set(_own_shard_actors()) - own_ray
    assert len(started) == 2, started  # as many as asked for, no extra engine
    wait_for(lambda: _all_dead(started), 120, "the run's actors to be stopped")

    # the in-process executor is not overlapped: its model loads after the input pass
    ref_ev = ref_res.manifest["throughput"]["startup_events"]
    assert ref_ev["input_ended"] <= ref_ev["engine_started"], ref_ev
    assert ref_res.manifest["throughput"]["startup_overlap_seconds"] == 0

    # a re-run with nothing new to label starts no engine at all
    again = label(make_cfg(small_input, out, executor="ray", num_workers=2))
    assert again.added == 0 and again.version == res.version
    assert set(_own_shard_actors()) - own_ray == started


def test_bad_row_stops_the_engine_started_for_it(small_input, tmp_path, own_ray):
    """A refresh whose new rows started the engines before a bad row: the error names file, line and field, the
    started actors are stopped, and the committed corpus is untouched."""
    out = tmp_path / "out"
    label(make_cfg(small_input, str(out), limit=3))  # the corpus the refresh adds to (in-process)
    before = (out / "manifest.json").read_text()
    inp = _bad_input(small_input, tmp_path, bad_line=7)  # rows 4-6 are new: the engine starts at row 4
    with pytest.raises(InputError) as e:
        label(make_cfg(inp, str(out), executor="ray", num_workers=2, shard_size=2))
    assert f"{inp} line 7" in str(e.value) and "steps" in str(e.value), e.value
    started = set(_own_shard_actors()) - own_ray
    # a refresh starts its engines at its first new row (a re-run with nothing new starts none, see above): here
    # one at row 4, a second at row 6 (one per --shard-size new rows), both before the bad row was read...
    assert len(started) == 2, started
    wait_for(lambda: _all_dead(started), 120, "the actors started for the refused run to be stopped")  # ...and stopped
    assert (out / "manifest.json").read_text() == before
    assert len(read_corpus(str(out))) == 3
    assert not list(out.glob("data/v00002/*.parquet")) and not list(out.glob("data/v00002/_staged/*"))

    # the same from the command line: exit 1, the row named, no traceback (a message and an exit code: the
    # command runs in this process, on this process's Ray)
    r = invoke_mcprm("label", "--input", inp, "--output", str(tmp_path / "cli"), "--k", "2", "--strategy", "per-step",
                  "--max-new-tokens", "16", "--shard-size", "2", "--executor", "ray", "--num-workers", "1",
                  "--no-progress", timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    msg = " ".join(r.stderr.split())
    assert f"{inp} line 7" in msg and "steps" in msg and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "cli" / "manifest.json").exists()


def test_a_model_that_does_not_load_is_the_same_clear_error(small_input, tmp_path, own_ray):
    """The engine start fails in the actors (weights cut short) while the driver reads the input with the model's
    tokenizer: the error is the one a worker that cannot start its backend always gave, and nothing is left."""
    model = tmp_path / "model"
    shutil.copytree(ROOT / "data" / "model", model)
    with open(model / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    out = tmp_path / "out"
    with pytest.raises(WorkerError, match="could not start its backend"):
        label(make_cfg(small_input, str(out), executor="ray", num_workers=1, model=str(model)))
    started = set(_own_shard_actors()) - own_ray
    assert len(started) == 1, started
    wait_for(lambda: _all_dead(started), 120, "the failed actor to be gone")
    assert not (out / "manifest.json").exists()


def test_a_resume_with_every_shard_done_stops_the_engine_it_started(small_input, reference_run, tmp_path, own_ray):
    """A run killed after its last shard, before its commit: the re-run (a new corpus: its engine starts before the
    input pass) finds nothing left to label, commits the finished shards and stops the engine it started."""
    from .fs_seam import run_killed

    _, _, ref = reference_run
    out = tmp_path / "out"
    r = run_killed("label", "--input", small_input, "--output", str(out), "--k", "2", "--strategy", "per-step",
                   "--max-new-tokens", "48", "--shard-size", "3", "--executor", "local", "-q",
                   kill="before:link:*/versions/*:1")
    assert r.returncode == -9, r.stdout + r.stderr
    assert not (out / "manifest.json").exists()
    res = label(make_cfg(small_input, str(out), executor="ray", num_workers=1))
    assert res.shards_run == 0 and res.shards_resumed > 0
    assert rows_by_key(read_corpus(str(out))) == ref
    th = res.manifest["throughput"]
    assert th["startup_overlap_seconds"] == 0 and "engine_start_seconds" not in th  # no engine served this run
    started = set(_own_shard_actors()) - own_ray
    assert len(started) == 1, started  # started at the lock...
    wait_for(lambda: _all_dead(started), 120, "the unused actor to be stopped")  # ...and stopped, unused
