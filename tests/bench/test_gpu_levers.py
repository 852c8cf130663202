"""bench/gpu_levers.py's driver on a CPU: levers parsed, work dealt by group, engine processes started (one after
another with ``stagger``), released together per phase, their tokens summed, a failing lever reported as a row.
The engine is tests/bench/fake_vllm (no GPU here); the GPU run is in the notes of the next GPU session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_levers  # noqa: E402


def test_presets_parse_and_split_memory():
    for preset in gpu_levers.PRESETS.values():
        for lever in preset.split(","):
            gpu_levers.parse(lever)
    s = gpu_levers.parse("e4+seqs512+graphs1024+stagger+topp")
    assert s["engines"] == 4 and s["stagger"] and s["phases"] == ["main", "short", "topp"]
    assert s["kwargs"] == {"max_num_seqs": 512, "compilation_config": {"max_cudagraph_capture_size": 1024},
                           "gpu_memory_utilization": 0.2125}
    assert gpu_levers.parse("graphs2048+fullgraph")["kwargs"] == {
        "compilation_config": {"max_cudagraph_capture_size": 2048, "cudagraph_mode": "FULL"}}


def test_work_shares_prefixes_in_groups_and_is_dealt_whole_groups():
    work = gpu_levers.make_work(50, 8, 256, 512)
    assert len(work) == 50 and all(256 <= w[3] <= 512 for w in work)
    by_group = {}
    for w in work:
        by_group.setdefault(w[4], []).append(w[0].split()[:300])
    assert all(all(p == ps[0] for p in ps) for ps in by_group.values())  # a group's prompts share 300 tokens
    shares = gpu_levers.deal(work, 3)
    assert sorted(map(tuple, (w for s in shares for w in s))) == sorted(map(tuple, work))
    homes = {w[4]: i for i, s in enumerate(shares) for w in s}
    assert all(homes[w[4]] == i for i, s in enumerate(shares) for w in s)  # no group split over engines


def test_driver_runs_levers_and_sums_their_tokens(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests/bench/fake_vllm"), str(ROOT)]))
    r = subprocess.run([sys.executable, str(ROOT / "bench/gpu_levers.py"), "--out", str(tmp_path),
                        "--levers", "base+topp,e2+stagger,e3,dp2", "--shape", "0.5b", "--prompts", "20", "--n", "2",
                        "--min-tokens", "3", "--max-tokens", "6", "--deadline-s", "240"],
                       capture_output=True, text=True, timeout=280, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {x["lever"]: x for x in map(json.loads, (tmp_path / "levers.jsonl").read_text().splitlines())}
    want = sum(w[1] * w[3] for w in gpu_levers.make_work(20, 2, 3, 6))
    for lever in ("base+topp", "e2+stagger", "e3"):
        assert "error" not in rows[lever], rows[lever]
        assert rows[lever]["generated_tokens"] == want  # every engine's share counted once
        assert rows[lever]["tok_per_s"] > 0 and rows[lever]["start_s"] is not None
    quarter = sum(w[1] * max(16, w[3] // 4) for w in gpu_levers.make_work(20, 2, 3, 6))
    assert rows["base+topp"]["topp_generated_tokens"] == rows["base+topp"]["short_generated_tokens"] == quarter
    assert rows["e2+stagger"]["engines"] == 2 and len(rows["e2+stagger"]["per_engine_tok_per_s"]) == 2
    assert "data_parallel_size" in rows["dp2"]["error"]  # a lever that cannot run is a row saying why
    assert "levers on" in r.stdout and "dp2" in r.stdout  # the table


def test_real_work_is_the_prompts_a_labeling_run_sends(tmp_path):
    """With a prompt format the step prefixes are mcprm's own prompts (what per-step sends: every prefix but the
    whole solution), so the raw engine's best is measured on the labeling work itself."""
    import json

    from rollouts.prompts import make_prompt_format

    sol = [{"id": "s1", "problem": "What is 2+3?", "steps": ["2+3 = 5.", "So 5.", "The answer is 5."]},
           {"id": "s2", "problem": "What is 1+1?", "steps": ["It is 2."]}]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sol))
    fmt = make_prompt_format("plain", None)
    work = gpu_levers.make_work(100, 8, 64, 64, real=str(path), fmt=fmt)
    assert [w[0] for w in work] == [fmt.prefix(sol[0]["problem"], sol[0]["steps"][:1]),
                                    fmt.prefix(sol[0]["problem"], sol[0]["steps"][:2]),
                                    fmt.prefix(sol[1]["problem"], sol[1]["steps"][:1])]
    assert {w[4] for w in work} == {"s1", "s2"} and all(w[1] == 8 and w[3] == 64 for w in work)
