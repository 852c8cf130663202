"""bench/gpu_e2e/prm_metrics.py against numbers worked out by hand and by brute force (the agreement with
`mcprm eval` on a real scored corpus is checked in test_data_run.py's CPU run)."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu_e2e"))
import prm_metrics as pm  # noqa: E402


def test_first_error_and_f1_by_hand():
    assert pm.first_error([0.9, None, 0.4, 0.1], 0.5) == 2
    assert pm.first_error([0.9, 0.6], 0.5) == -1
    rows = [([0.9, 0.3, 0.2], 1),  # error at 1, found
            ([0.9, 0.8, 0.2], 1),  # error at 1, flagged at 2: missed
            ([0.9, 0.8], -1),      # right, none flagged
            ([0.4, 0.9], -1)]      # right, flagged at 0
    got = pm.f1_at(rows, [0.5] * 4)
    assert got["acc_error"] == 0.5 and got["acc_correct"] == 0.5 and got["f1"] == 0.5
    # at 0.35 the second row's error is still missed (flagged at 2), the last right row no longer flagged
    got = pm.f1_at(rows, [0.35] * 4)
    assert got == {"f1": 2 * 0.5 * 1.0 / 1.5, "acc_error": 0.5, "acc_correct": 1.0}


def test_step_auroc_is_the_pairwise_share_over_judged_steps():
    rng = random.Random(5)
    rows = {}
    labels = {}
    for i in range(40):
        n = rng.randint(2, 7)
        rows[f"r{i}"] = [round(rng.random(), 2) for _ in range(n)]  # ties on purpose
        labels[f"r{i}"] = rng.choice([-1, rng.randrange(n)])
    got = pm.metrics(rows, labels, 0.5)["step_auroc"]
    pos, neg = [], []
    for i, s in rows.items():
        lab = labels[i]
        for j, p in enumerate(s if lab < 0 else s[: lab + 1]):  # steps after the first error are not judged
            (pos if lab < 0 or j < lab else neg).append(p)
    want = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg)) / (len(pos) * len(neg))
    assert abs(got - want) < 1e-12


def test_split_half_reads_each_half_with_the_other_halfs_threshold():
    # half 0: errors score 0.35, right steps 0.5; half 1: errors 0.15, right steps 0.3. Each half alone has a
    # perfect threshold (0.5 and 0.3); read with the other half's, half 0 misses its errors and half 1 flags its
    # right solutions: held out, F1 is 0.5, where choosing on the rows themselves would say 1.0
    ids = [f"s{i}" for i in range(200)]
    by_half = {h: [i for i in ids if pm.half(i) == h] for h in (0, 1)}
    assert min(len(v) for v in by_half.values()) > 40
    rows, labels = {}, {}
    for h, (err, ok) in ((0, (0.35, 0.5)), (1, (0.15, 0.3))):
        for k, i in enumerate(by_half[h]):
            if k % 2:
                rows[i], labels[i] = [0.9, err, 0.9], 1
            else:
                rows[i], labels[i] = [0.9, ok], -1
    m = pm.metrics(rows, labels, 0.5)
    assert m["split_half_thresholds"] == [0.3, 0.5]  # [read on half 0 (chosen on half 1), read on half 1]
    assert m["split_half"]["acc_error"] == 0.5 and m["split_half"]["acc_correct"] == 0.5
    assert m["f1_split_half"] == 0.5
    # at 0.5: every error found, half 1's right solutions flagged
    assert m["at_05"]["acc_error"] == 1.0 and m["at_05"]["acc_correct"] == 0.5 and m["f1_own"] == m["f1_05"]


def test_paired_rows_reads_the_committed_rows_as_their_own_metrics_did(capsys):
    # two implementations of the step AUROC (prm_metrics.py on the device, pipeline.training.protocol here) must
    # agree on the same scores; the reference is the dev part of the shared ProcessBench file
    import json
    from pathlib import Path

    pb = Path("/work/shared/data/processbench_math_dev.jsonl.gz")
    rows = Path(__file__).resolve().parents[2] / "bench" / "gpu_e2e" / "results" / "data_run" / "rows"
    if not pb.exists() or not (rows / "def1500" / "scores_pb.jsonl.gz").exists():
        pytest.skip("needs the shared ProcessBench file and the landed rows")
    sys.path.insert(0, str(rows.parents[2]))
    import paired_rows

    assert paired_rows.main(["today1500", "def1500", "--pb", str(pb), "--bootstrap", "200", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    for side, row in (("first", "today1500"), ("second", "def1500")):
        own = json.loads((rows / row / "metrics_pb.json").read_text())
        # the dump keeps 4 decimals of each score, so a few steps tie that the device's full scores did not
        assert res[side]["step_auroc"] == pytest.approx(own["step_auroc"], abs=1e-4)
        assert res[side]["f1_at_0.5"] == pytest.approx(own["f1_05"], abs=0.01)
    d = res["differences"]["step_auroc"]
    assert d["low"] <= d["difference"] <= d["high"] and d["se"] > 0


def test_paired_rows_agrees_with_the_device_metrics_on_rows_it_is_given(tmp_path, capsys):
    """The same cross-check as above on a ProcessBench-style file and two rows written here (so it runs on any
    machine): each row's numbers through paired_rows (pipeline.training.protocol) are those prm_metrics gives the
    same scores, and a row compared with itself differs by nothing."""
    import gzip
    import json

    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "bench" / "gpu_e2e"))
    import bench_human_labels as h
    import paired_rows

    rng = random.Random(11)
    sets, ids = [], []
    for i in range(400):
        n = rng.randint(2, 6)
        lab = rng.choice([-1, -1, rng.randrange(n)])
        sets.append({"id": f"pb-{i}", "problem": f"problem {i // 2}", "steps": [f"s{j}" for j in range(n)],
                     "answer": "1", "label": lab})
        if h.part_of(f"pb-{i}") == "dev":
            ids.append(i)
    pb = tmp_path / "pb.jsonl.gz"
    with gzip.open(pb, "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in sets))
    labels = {sets[i]["id"]: sets[i]["label"] for i in ids}
    for row, skill in (("good", 0.35), ("weak", 0.1)):
        scores = {}
        for i in ids:
            r = sets[i]
            scores[r["id"]] = [round(min(1.0, max(0.0, (0.75 if r["label"] < 0 or j < r["label"] else 0.75 - skill * 2)
                                              + rng.gauss(0, 0.2))), 4) for j in range(len(r["steps"]))]
        d = tmp_path / "rows" / row
        d.mkdir(parents=True)
        with gzip.open(d / "scores_pb.jsonl.gz", "wt", encoding="utf-8") as f:
            f.write("".join(json.dumps({"id": k, "prm_score": v}) + "\n" for k, v in scores.items()))
        (d / "metrics_pb.json").write_text(json.dumps(pm.metrics(scores, labels, 0.5)))
    args = ["--pb", str(pb), "--rows", str(tmp_path / "rows"), "--bootstrap", "200", "--json"]
    assert paired_rows.main(["good", "weak", *args]) == 0
    res = json.loads(capsys.readouterr().out)
    for side, row in (("first", "good"), ("second", "weak")):
        own = json.loads((tmp_path / "rows" / row / "metrics_pb.json").read_text())
        assert res[side]["step_auroc"] == pytest.approx(own["step_auroc"], abs=1e-9)
        assert res[side]["f1_at_0.5"] == pytest.approx(own["f1_05"], abs=1e-9)
    d = res["differences"]["step_auroc"]
    assert d["difference"] > 0 and d["low"] <= d["difference"] <= d["high"] and d["se"] > 0
    assert paired_rows.main(["good", "good", *args]) == 0
    same = json.loads(capsys.readouterr().out)["differences"]["step_auroc"]
    assert same["difference"] == 0 and same["se"] == 0
