"""The Ray executor as a fleet (issue 18): a multi-node cluster named by --ray-address labels exactly as one
process does; workers kept across runs (``RayExecutor.borrow``) label each run with that run's settings; shard
layouts shrink towards the end of a run. Real local Ray clusters, the real bundled model, real Parquet files."""

from __future__ import annotations

import json

import pytest

from pipeline.corpus import read_corpus
from pipeline.execution.sizing import shard_sizes
from pipeline.run import label

from .conftest import N_ROWS, make_cfg, rows_by_key, run_mcprm

pytestmark = pytest.mark.slow  # a two-node Ray cluster and fleets over it, minutes in all (started first: tests/conftest.py)


@pytest.fixture(scope="module")
def two_nodes():
    """A Ray cluster of this module's own, two nodes (a head and a worker node, one CPU each: this test process's
    own processes), stopped at the end, the fleets' detached actors with it. Its tests share it (a cluster start
    is the slow part of each on a loaded 2-core machine) and each leaves it as it found it: its fleets down."""
    from ray.cluster_utils import Cluster

    from ._ray_files import own_ray_files

    with own_ray_files() as folder:  # Ray's files in a folder of this module's own, not a session folder in /tmp/ray
        cluster = Cluster(initialize_head=True, connect=False,
                          head_node_args={"num_cpus": 1, "include_dashboard": False, "temp_dir": folder})
        try:
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            cluster.shutdown()


@pytest.mark.timeout(1500)  # a two-node Ray cluster started, then a run on it (loaded 2-core machine)
def test_multi_node_cluster_by_address_matches_in_process(small_input, reference_run, two_nodes, tmp_path):
    """Two Ray nodes (a head and a worker node, one CPU each): `mcprm label --ray-address` puts one worker on
    each and writes the same labels as the in-process run."""
    _, _, ref = reference_run
    out = tmp_path / "out"
    r = run_mcprm("label", "--input", small_input, "--output", str(out), "--k", "2", "--strategy", "per-step",
                  "--max-new-tokens", "48", "--shard-size", "3", "--ray-address", two_nodes.address,
                  "--num-workers", "2", "--cpus-per-worker", "1", "--quiet", timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["throughput"]["workers"] == 2
    assert rows_by_key(read_corpus(str(out))) == ref


def _actor_pids(ex) -> list[int]:
    """The pids of a Ray executor's worker actors (each answers its own)."""
    return ex.ray.get([a.pid.remote() for a in ex.actors])


def test_kept_workers_label_later_runs_with_their_own_settings(small_input, tmp_path):
    """One set of Ray workers serves two runs with different outputs and K: each run's labels equal those of a
    run that started its own workers (here: in-process), and the workers are not restarted in between."""
    from pipeline.execution.executors import RayExecutor

    cfg1 = make_cfg(small_input, str(tmp_path / "a"), executor="ray", num_workers=2, limit=5)
    cfg2 = make_cfg(small_input, str(tmp_path / "b"), executor="ray", num_workers=2, k=3)
    fleet = RayExecutor(cfg1.resolved())  # workers built from the run's settings, bundled model filled in
    try:
        r1 = label(cfg1, executor=fleet.borrow())
        tl1 = list(fleet.timeline)
        pids1 = sorted(_actor_pids(fleet))
        r2 = label(cfg2, executor=fleet.borrow(1))  # one of the two workers
        pids2 = sorted(_actor_pids(fleet))
    finally:
        fleet.close()
    assert pids1 == pids2  # the same worker processes (no restart between runs)
    assert r1.added == 5 and r2.added == N_ROWS
    ref1 = label(make_cfg(small_input, str(tmp_path / "a-local"), limit=5))
    ref2 = label(make_cfg(small_input, str(tmp_path / "b-local"), k=3))
    assert rows_by_key(read_corpus(str(tmp_path / "a"))) == rows_by_key(read_corpus(ref1.output))
    assert rows_by_key(read_corpus(str(tmp_path / "b"))) == rows_by_key(read_corpus(ref2.output))
    assert {t["actor"] for t in fleet.timeline} == {0, 1}
    # 5 one-solution shards on 2 workers: two each at first, but the last shard (no more left than workers) went
    # to a worker with nothing else in flight, not into a busy worker's queue
    assert len(tl1) == 5
    last = max(tl1, key=lambda t: t["submitted"])
    assert not [t for t in tl1 if t is not last and t["actor"] == last["actor"]
                and t["submitted"] <= last["submitted"] < t["done"]], tl1
    assert all(t["started"] <= t["ended"] for t in fleet.timeline)


def test_kept_workers_refuse_another_model(small_input, tmp_path):
    from pipeline.execution.executors import RayExecutor
    from pipeline.execution.shard_worker import WorkerError

    cfg1 = make_cfg(small_input, str(tmp_path / "a"), executor="ray", num_workers=1, limit=2)
    fleet = RayExecutor(cfg1.resolved())  # workers built from the run's settings, bundled model filled in
    try:
        other = make_cfg(small_input, str(tmp_path / "b"), executor="ray", num_workers=1, limit=2,
                         dtype="float64")
        with pytest.raises((ValueError, WorkerError), match="another model or backend options"):
            label(other, executor=fleet.borrow())
    finally:
        fleet.close()
    assert not (tmp_path / "b" / "manifest.json").exists()


@pytest.mark.parametrize("n,size,workers", [(96, 8, 4), (96, 64, 4), (1000, 64, 8), (10, 64, 1), (1, 5, 3),
                                            (0, 8, 2), (640, 8, 2)])
def test_shard_sizes_cover_the_input_and_shrink_at_the_end(n, size, workers):
    sizes = shard_sizes(n, size, workers)
    assert sum(sizes) == n and all(1 <= s <= size for s in sizes)
    assert sizes == sorted(sizes, reverse=True)  # never a big shard after a small one
    if workers > 1:  # waves of 2 x workers equal shards (each worker holds two at once)
        waves = [sizes[i : i + 2 * workers] for i in range(0, len(sizes), 2 * workers)]
        assert all(len(set(w[:-1] if w is waves[-1] else w)) <= 1 for w in waves), sizes
    if workers == 1:
        assert all(s == size for s in sizes[:-1])
    elif n > 4 * workers * size:
        assert sizes[0] == size and sizes[-1] < size  # full shards first, smaller ones last
        assert min(sizes) >= max(1, size // 4)
    elif n >= 4 * workers:  # a small job: ~four shards per worker, so the first wave (two each) is balanced
        assert len(sizes) >= 4 * workers and len(set(sizes[: 2 * workers])) == 1, sizes


def test_weighted_cuts_balance_work_and_keep_the_count_layout():
    import random

    from pipeline.execution.sizing import solution_cost, weighted_cuts

    sizes = shard_sizes(96, 64, 4)
    assert weighted_cuts([3.0] * 96, sizes) == sizes  # equal work: the count layout
    rnd = random.Random(1)
    cost = solution_cost("per-step")
    costs = [cost(rnd.randint(3, 10)) for _ in range(96)]
    cut = weighted_cuts(costs, sizes)
    assert sum(cut) == 96 and len(cut) == len(sizes) and min(cut) >= 1

    def work(layout):
        out, start = [], 0
        for n in layout:
            out.append(sum(costs[start : start + n]))
            start += n
        return out

    spread = lambda w: max(w) - min(w)  # noqa: E731
    assert spread(work(cut)) < spread(work(sizes))
    # a tail of very unequal solutions still gives every shard one at least, and ends at the last one
    assert weighted_cuts([100.0, 1.0, 1.0, 1.0], [1, 1, 1, 1]) == [1, 1, 1, 1]
    assert weighted_cuts([1.0] * 9 + [50.0], [4, 3, 3]) == [8, 1, 1]  # the big one alone, at the end
    with pytest.raises(ValueError):
        weighted_cuts([1.0, 2.0], [3])


# ---------------------------------------------------------------------------------------------- issue 29: warm fleet
def _lines(path, n: int, start: int = 0) -> list[str]:
    return open(path).read().splitlines()[start : start + n]


def _fleet_json(address: str, name: str) -> list[dict]:
    r = run_mcprm("fleet", "status", "--ray-address", address, "--fleet", name, "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


@pytest.fixture
def ray_head(two_nodes):
    """The address of the module's own Ray cluster (two nodes, one CPU each). Each test that starts a fleet on it
    checks that its fleet is gone at its end (`fleet down`, or the idle fleet stopping itself)."""
    return two_nodes.address


def test_warm_fleet_serves_two_runs_and_a_refresh_with_no_engine_start(small_input, reference_run, ray_head,
                                                                       tmp_path):
    """`mcprm fleet up`, then `mcprm label --fleet` twice (the second a refresh with new rows): both borrow the same
    worker process (no engine start, said in the manifest), label as an in-process run does, and leave the fleet up;
    another engine is refused naming the option; `fleet down` stops it."""
    _, _, ref = reference_run
    first, second = tmp_path / "first.jsonl", small_input  # the first half, then all: four new rows
    first.write_text("\n".join(_lines(small_input, N_ROWS // 2)) + "\n")
    out = tmp_path / "out"
    run_file = tmp_path / "refresh.yaml"  # one run file for `fleet up` (its engine options) and `label`
    run_file.write_text(f"output: {out}\nk: 2\nstrategy: per-step\nmax_new_tokens: 48\nshard_size: 3\n"
                        "num_workers: 1\ncpus_per_worker: 1\nkeep_warm: 10m\n")
    up = run_mcprm("fleet", "up", "--ray-address", ray_head, "--fleet", "t1", "--config", str(run_file), "--json",
                   timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    (worker,) = [json.loads(line) for line in up.stdout.splitlines() if line.strip()]
    assert worker["fleet"] == "t1" and worker["engine"]["backend"] == "hf" and worker["lease"] is None
    assert worker["keep_warm_s"] == 600 and worker["cpus"] == 1

    args = ("--config", str(run_file), "--ray-address", ray_head, "--fleet", "t1", "--quiet")
    manifests = []
    for inp in (first, second):
        r = run_mcprm("label", "--input", str(inp), *args, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "model load 0.0 s" in r.stdout and "borrowed 1 warm worker(s) of the fleet" in r.stdout, r.stdout
        manifests.append(json.loads((out / "manifest.json").read_text()))
        (st,) = _fleet_json(ray_head, "t1")
        assert st["pid"] == worker["pid"] and st["started_at"] == worker["started_at"]  # not restarted
        assert st["lease"] is None and st["expires_at"] is not None  # released, idle, warm until it expires
    assert [m["version"] for m in manifests] == [1, 2]
    assert [(m["counts"]["added"], m["counts"]["reused"]) for m in manifests] == [(4, 0), (4, 4)]  # a refresh
    for m in manifests:
        fleet = m["execution"]["fleet"]
        assert fleet["borrowed"] is True and fleet["name"] == "t1" and fleet["pids"] == [worker["pid"]]
        assert m["execution"]["executor"] == "ray" and "borrowed" in m["execution"]["reason"]
        assert m["throughput"]["startup_seconds"] == 0.0  # no engine start in the run
        # the backend's counters are this run's own, not the warm worker's since it started
        assert m["throughput"]["backend"]["generated_tokens"] == m["throughput"]["rollout_tokens"] > 0
    assert st["runs_served"] == 2
    corpus = rows_by_key(read_corpus(str(out)))
    assert corpus == ref  # what one in-process run over the whole input gives (first errors fitted to all)

    other = run_mcprm("label", "--input", str(first), "--seed", "1", *args, "--output", str(tmp_path / "o2"),
                      timeout=300)
    assert other.returncode != 0
    assert "--seed: the fleet's 0, this run's 1" in other.stderr and "Traceback" not in other.stderr, other.stderr
    assert not (tmp_path / "o2" / "manifest.json").exists()
    (st,) = _fleet_json(ray_head, "t1")
    assert st["pid"] == worker["pid"] and st["lease"] is None

    down = run_mcprm("fleet", "down", "--ray-address", ray_head, "--fleet", "t1", timeout=300)
    assert down.returncode == 0 and "stopped 1 worker" in down.stdout, down.stdout + down.stderr
    assert _fleet_json(ray_head, "t1") == []
    gone = run_mcprm("label", "--input", str(second), *args, timeout=300)
    assert gone.returncode != 0 and "no fleet named 't1' is up" in gone.stderr, gone.stderr


def test_a_leased_worker_serves_one_run_and_an_idle_fleet_stops_itself(small_input, ray_head, tmp_path):
    """While a run holds the fleet's only worker, another run is refused at once, naming the holder; released, the
    worker serves the next run; idle for its --keep-warm, the fleet stops itself (no driver left running)."""
    import ray

    from pipeline.execution.executors import warm_executor

    up = run_mcprm("fleet", "up", "--ray-address", ray_head, "--fleet", "t2", "--num-workers", "1",
                   "--cpus-per-worker", "1", "--keep-warm", "1h", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    if ray.is_initialized():  # an earlier test's own Ray: this test's fleet is on its own head
        ray.shutdown()
    held = warm_executor(make_cfg(small_input, str(tmp_path / "holder"), executor="ray", ray_address=ray_head,
                                 fleet="t2"))
    try:
        args = ("--input", small_input, "--output", str(tmp_path / "b"), "--ray-address", ray_head, "--fleet", "t2",
                "--k", "2", "--max-new-tokens", "48", "--limit", "2", "--quiet")
        refused = run_mcprm("label", *args, timeout=300)
        assert refused.returncode != 0 and "serving another run" in refused.stderr, refused.stderr
        assert str(tmp_path / "holder") in refused.stderr and "Traceback" not in refused.stderr
        (st,) = _fleet_json(ray_head, "t2")
        assert st["lease"]["holder"]["output"] == str(tmp_path / "holder")
        busy_down = run_mcprm("fleet", "down", "--ray-address", ray_head, "--fleet", "t2", timeout=300)
        assert busy_down.returncode != 0 and "--force" in busy_down.stderr
    finally:
        held.close()
        ray.shutdown()
    ok = run_mcprm("label", *args, "--keep-warm", "2s", timeout=600)  # released: served; then warm 2 s only
    assert ok.returncode == 0, ok.stdout + ok.stderr
    from .conftest import wait_for

    wait_for(lambda: _fleet_json(ray_head, "t2") == [], 120, "the idle fleet to stop itself")


def test_lease_one_run_at_a_time_and_lapse():
    """The lease rule of a fleet worker (no Ray): a second run is refused while the first holds it; released or
    lapsed (its driver stopped renewing), it is free again."""
    import threading

    from pipeline.execution.fleet import FleetActor

    a = object.__new__(FleetActor)  # the lease state only, without a backend
    a.lease, a.busy, a.idle_since, a.runs_served, a._lock = None, 0, 0.0, 0, threading.Lock()
    a.stopping = False
    a.info = {"keep_warm_s": 60.0}
    one, two = {"output": "/a"}, {"output": "/b"}
    assert a.acquire("r1", one, 60, now=100.0) is None
    assert a.acquire("r2", two, 60, now=110.0)["holder"] == one  # held: refused, the holder named
    assert a.acquire("r1", one, 60, now=150.0) is None  # renewed until 210
    assert a.acquire("r2", two, 60, now=200.0) is not None
    a.release("r2")  # not its lease: nothing happens
    assert a.acquire("r2", two, 60, now=205.0) is not None
    assert a.acquire("r2", two, 60, now=211.0) is None  # r1 stopped renewing: lapsed, taken
    a.release("r2", keep_warm_s=5)
    assert a.lease is None and a.info["keep_warm_s"] == 5.0 and a.runs_served == 2
    a.stopping = True  # past its keep-warm, about to stop: no lease any more
    assert a.acquire("r3", one, 60, now=300.0) == {"stopping": True} and a.lease is None
