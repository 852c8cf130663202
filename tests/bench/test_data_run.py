"""The data run's device-side logic (bench/gpu_e2e/data_run.sh and data_run.py) on this machine: the real script
and the real mcprm with the bundled model on a few problems, real subprocesses throughout. What a GPU adds (vLLM,
the 1.5B model, the times) is not here; what decides whether a stretch of GPU time is lost is: a failing stage
stops the call with its status, nothing over the return limits is written, a file comes back whole or not at
all, a generated chunk is kept and never made twice, a corpus grows by versions that name their sizes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
D = ROOT / "bench" / "gpu_e2e"
sys.path.insert(0, str(D))
import data_run as dr  # noqa: E402

MiB = 1 << 20


def _env(tmp: Path, **extra) -> dict:
    env = dict(os.environ)
    # the venv's python3 first: the script calls python3 by name, as on the GPU machine
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env.update({"DR_RESULTS": str(tmp / "results"), "PYTHONPATH": str(ROOT)})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _py(tmp: Path, *args, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(D / "data_run.py"), *map(str, args)], env=_env(tmp, **extra),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def _state(results: Path, **kw) -> None:
    results.mkdir(parents=True, exist_ok=True)
    st = {"code": {"label": "a" * 40, "train": "a" * 40}, "corpora": {}, "gen": {}, "measured": {}, "rows": {},
          "calls": []}
    st.update(kw)
    (results / "STATE.json").write_text(json.dumps(st))


# ------------------------------------------------------------------------------------------- the plan itself
def test_plan_compares_labelers_at_equal_solutions_and_the_defaults_over_sizes():
    by_size: dict[int, set] = {}
    for corpus, n, _opts, optional in dr.ROWS.values():
        assert n in dr.CORPORA[corpus]["sizes"], f"a row at {n} needs that version of corpus {corpus}"
        if not optional:
            by_size.setdefault(n, set()).add(corpus)
    assert by_size[3000] >= {"def", "ps"}  # label quality: every labeler at the same 3,000 solutions
    assert {1500, 5000, 10000} <= {n for c, n, _, _ in dr.ROWS.values() if c == "def"}  # the data-size curve
    # the chunks: disjoint ranges covering the 2,500 training and 500 held-out problems of the run's files
    for split, total in (("train", 2500), ("heldout", 500)):
        spans = sorted((a, b) for s, a, b, _ in dr.CHUNKS.values() if s == split)
        assert spans[0][0] == 0 and spans[-1][1] == total
        assert all(x[1] == y[0] for x, y in zip(spans, spans[1:]))
    assert sum((b - a) * k for s, a, b, k in dr.CHUNKS.values() if s == "train") >= 10000
    assert all(k == 8 for s, _, _, k in dr.CHUNKS.values() if s == "heldout")
    assert dr.solutions_needed(3000) == ["t0000", "t0375"]
    assert dr.solutions_needed(10000) == dr.TRAIN_CHUNKS


def test_a_model_part_and_the_tree_fit_one_call():
    # every call sends the working tree; a part call sends a part beside it (the limit is 64 MiB a call)
    assert dr.travel_size() + dr.PART_BYTES + dr.TRAVEL_MARGIN <= dr.TRAVEL_BYTES
    assert (dr.N_PARTS - 1) * dr.PART_BYTES < dr.GGUF_BYTES <= dr.N_PARTS * dr.PART_BYTES


def test_next_orders_stages_after_their_inputs(tmp_path):
    results = tmp_path / "results"
    _state(results, corpora={"def": {"versions": {"1500": 1}}})
    (results / "gen").mkdir()
    for c in ("t0000", "h0000"):
        (results / "gen" / f"{c}.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    stages = dr.todo(json.loads((results / "STATE.json").read_text()), results)
    flat = [" ".join(s) for s in stages]
    assert flat[0] == "gen h0375"  # every row's best-of-8 reads the 500 held-out problems
    assert flat.index("gen t0375") < flat.index("label def 3000") < flat.index("row def3000")
    assert flat.index("label ps 3000") < flat.index("row ps3000")
    assert "label def 1500" not in flat and "gen t0000" not in flat  # done before
    assert flat.index("row def10000") < flat.index("row nt3000")  # optional rows last
    calls, used = dr.pack_calls(json.loads((results / "STATE.json").read_text()), stages, 10 ** 6)
    assert all(sum(e for _, e in c) <= dr.CALL_S for c in calls)
    # per-step K=8 over 3,000 solutions is longer than a call: it goes on over several, each a resume
    assert sum(1 for c in calls for s, _ in c if s == ("label", "ps", "3000")) >= 2


# -------------------------------------------------------------------------------------------------- pack
def test_pack_refuses_what_would_not_come_back_and_writes_nothing(tmp_path):
    work, out = tmp_path / "w", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    big = work / "big.bin"
    with open(big, "wb") as f:  # sparse: 17 MiB on no disk
        f.truncate(17 * MiB)
    r = _py(tmp_path, "pack", work, out, "big.bin", "big.bin")
    assert r.returncode == 5 and "16 MiB" in r.stderr
    assert list(out.iterdir()) == []
    (work / "small.txt").write_text("x")
    r = _py(tmp_path, "pack", work, out, "bad name.txt", "small.txt")
    assert r.returncode == 5 and list(out.iterdir()) == []
    for i in range(6):
        (out / f"f{i}").write_text("x")
    r = _py(tmp_path, "pack", work, out, "seventh.txt", "small.txt", DR_OUT_RESERVED=2)
    assert r.returncode == 5 and "8" in r.stderr and not (out / "seventh.txt").exists()
    r = _py(tmp_path, "pack", work, out, "f0", "small.txt", DR_OUT_RESERVED=2)  # replacing one is no new file
    assert r.returncode == 0, r.stderr
    r = _py(tmp_path, "pack", work, out, "c_x.tgz", "small.txt", DR_OUT_RESERVED=1)
    assert r.returncode == 0, r.stderr
    (out / "f1").unlink()
    (out / "a" / "b" / "c").mkdir(parents=True)  # 3 folders down: the limit is 2
    (out / "a" / "b" / "c" / "lost.txt").write_text("x")
    r = _py(tmp_path, "pack", work, out, "more.txt", "small.txt")
    assert r.returncode == 5 and "folders down" in r.stderr and not (out / "more.txt").exists()
    (out / "a" / "b" / "c" / "lost.txt").unlink()
    with tarfile.open(out / "c_x.tgz") as t:
        assert t.getnames() == ["small.txt"]


def _committed_versions() -> dict:
    """The versions the committed corpus c_def holds, as STATE.json recorded them when the corpus was landed (the
    two are committed together): what land must read from the archive itself."""
    state = json.loads((ROOT / "bench" / "gpu_e2e" / "results" / "data_run" / "STATE.json").read_text())
    return state["corpora"]["def"]["versions"]


def test_a_copy_cut_off_leaves_the_old_file_whole_and_land_skips_the_temporary(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    earlier = (ROOT / "bench" / "gpu_e2e" / "results" / "data_run" / "c_def.tgz").read_bytes()  # a real corpus
    (out / "c_def.tgz").write_bytes(earlier)
    src = tmp_path / "new"
    src.write_bytes(b"n" * 4096)

    def cut(*a, **k):
        raise KeyboardInterrupt  # the call's end between the copy and the rename

    monkeypatch.setattr(dr.os, "replace", cut)
    with pytest.raises(KeyboardInterrupt):
        dr.place(src, out, "c_def.tgz")
    monkeypatch.undo()
    assert (out / "c_def.tgz").read_bytes() == earlier
    assert (out / ".c_def.tgz.tmp").exists()
    # land takes the call's files but never a temporary one
    results = tmp_path / "results"
    _state(results)
    (out / "call.json").write_text(json.dumps({"code": {"label": "a" * 40, "train": "a" * 40}, "rc": 3,
                                               "corpora": {"def": {"versions": {"1500": 1}, "partial": None}}}))
    r = _py(tmp_path, "land", out)
    assert r.returncode == 0, r.stderr
    assert (results / "c_def.tgz").read_bytes() == earlier
    assert not any(p.name.endswith(".tmp") for p in results.rglob("*"))
    st = json.loads((results / "STATE.json").read_text())
    assert st["corpora"]["def"]["versions"] == _committed_versions() and st["calls"][-1]["rc"] == 3
    # a call made with other code than the pinned one is refused whole
    (out / "call.json").write_text(json.dumps({"code": {"label": "b" * 40, "train": "a" * 40}, "rc": 0}))
    r = _py(tmp_path, "land", out)
    assert r.returncode == 1 and "pins" in r.stderr


def test_a_call_cut_before_its_record_still_lands_its_whole_files(tmp_path):
    # the device kills a command at its limit: no call.json, but what was placed is whole
    out, results = tmp_path / "out", tmp_path / "results"
    out.mkdir()
    _state(results)
    (out / "gen-t0375.jsonl.gz").write_bytes(gzip.compress(b'{"id": 1}\n{"id": 2}\n'))
    seed = ROOT / "bench" / "gpu_e2e" / "results" / "data_run" / "c_def.tgz"  # the real corpus as committed
    (out / "c_def.tgz").write_bytes(seed.read_bytes())
    r = _py(tmp_path, "land", out)
    assert r.returncode == 0, r.stderr
    st = json.loads((results / "STATE.json").read_text())
    assert st["gen"]["t0375"]["solutions"] == 2
    # read from the corpus's own version file, not from the call's record (it has none here)
    assert st["corpora"]["def"]["versions"] == _committed_versions()
    assert st["calls"][-1]["rc"] is None


def test_the_model_folders_small_files_land_and_travel_with_the_next_set_up(tmp_path):
    """The first set-up's model_meta.tgz is kept in results/ and `prepare` carries it, so later set-ups only
    dequantize the weights (convert_fast.py)."""
    out, results = tmp_path / "out", tmp_path / "results"
    out.mkdir()
    _state(results)
    (out / dr.MODEL_META).write_bytes(b"meta")
    r = _py(tmp_path, "land", out)
    assert r.returncode == 0, r.stderr
    assert (results / dr.MODEL_META).read_bytes() == b"meta" and "skipped" not in r.stdout


def test_the_fast_conversion_names_every_tensor_of_the_models_architecture():
    sys.path.insert(0, str(D))
    import convert_fast as cf

    assert cf.hf_name("blk.27.attn_q.bias") == "model.layers.27.self_attn.q_proj.bias"
    assert cf.hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert len(set(cf.BLOCK.values())) == len(cf.BLOCK) == 12  # Qwen2's 12 tensors a layer, each named once
    with pytest.raises(ValueError, match="unknown GGUF tensor"):
        cf.hf_name("blk.0.attn_qkv.weight")  # another architecture's fused layout: refused, not guessed


def test_a_corpus_packed_for_the_next_machine_leaves_its_lock_behind(tmp_path):
    work, out = tmp_path / "w", tmp_path / "out"
    (work / "c_def" / "data").mkdir(parents=True)
    (work / "c_def" / "_lock").write_text("{}")
    (work / "c_def" / "_lock.claim-1").write_text("{}")
    (work / "c_def" / "data" / "part.parquet").write_bytes(b"p")
    out.mkdir()
    r = _py(tmp_path, "pack", work, out, "c_def.tgz", "c_def")
    assert r.returncode == 0, r.stderr
    with tarfile.open(out / "c_def.tgz") as t:
        names = t.getnames()
    assert "c_def/data/part.parquet" in names and not any("_lock" in n for n in names)


def test_the_runner_refuses_an_unknown_stage_before_running_any(tmp_path):
    r = subprocess.run(["bash", str(D / "data_run.sh"), "setup", "+", "gne"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, env=_env(tmp_path, OUT=tmp_path / "out", DR_WORK=tmp_path / "w"))
    assert r.returncode == 2 and "unknown stage: gne" in r.stdout
    assert not (tmp_path / "w" / "done.setup").exists()


# --------------------------------------------------------------------------------- the stages on a CPU
def _cpu_run(tmp: Path, *stages: str, **extra) -> subprocess.CompletedProcess:
    env = _env(tmp, DR_CPU=1, E2E_SNAP=ROOT, E2E_MODEL=ROOT / "data" / "model", E2E_BACKEND="hf",
               E2E_PROMPT_FORMAT="plain", E2E_DEVICE="cpu", E2E_TPL="Problem: {problem}\nSolution:\n",
               DR_PB=tmp / "pb.jsonl.gz", DR_PB_LIMIT=6, DR_TOKENS=48, DR_EST_SCALE=0, OUT=tmp / "out",
               DR_WORK=tmp / "w", DR_PLAN_FILE=tmp / "plan.json", DR_PROBLEMS_DIR=tmp)
    env.update({k: str(v) for k, v in extra.items()})
    out = tmp / "out"
    if out.exists():
        for p in out.iterdir():
            p.unlink()
    return subprocess.run(["bash", str(D / "data_run.sh"), *stages], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200, env=env)


def _land(tmp: Path) -> dict:
    r = _py(tmp, "land", tmp / "out")
    assert r.returncode == 0, r.stderr
    return json.loads((tmp / "results" / "STATE.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a dozen mcprm runs of the bundled model on a loaded 2-core machine
def test_the_stages_on_a_cpu(tmp_path):
    tmp = tmp_path
    probs = (ROOT / "data" / "problems.jsonl").read_text().splitlines()
    for split, lines in (("train", probs[:2]), ("heldout", probs[100:106])):
        with gzip.open(tmp / f"problems_big_{split}.jsonl.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    (tmp / "plan.json").write_text(json.dumps({
        "chunks": {"t0000": ["train", 0, 2, 2], "h0000": ["heldout", 0, 6, 2]},
        "corpora": {"def": {"opts": "--k 2", "sizes": [2, 4]}},
        "rows": {"def2": ["def", 2, "", False]}}))
    with gzip.open(tmp / "pb.jsonl.gz", "wt") as f:  # ProcessBench's layout, from the bundled sample
        for line in (ROOT / "data" / "sample.jsonl").read_text().splitlines()[:40]:
            s = json.loads(line)
            f.write(json.dumps({"id": s["id"], "problem": s["problem"], "steps": s["steps"], "answer": s["answer"],
                                "label": s["reference_first_error"]}) + "\n")
    _state(tmp / "results")

    # a fresh machine: every stage but setup says so and stops
    r = _cpu_run(tmp, "gen")
    assert r.returncode == 4 and "fresh machine" in r.stdout
    r = _cpu_run(tmp, "setup")
    assert r.returncode == 0, r.stdout + r.stderr

    # time-bounded: with no time left nothing starts; with one second the chunk in flight is stopped and
    # nothing of it is kept (generate writes its output whole or not at all)
    r = _cpu_run(tmp, "gen", DR_CALL_S=0)
    assert r.returncode == 3 and "not started" in r.stdout
    r = _cpu_run(tmp, "gen", "t0000", DR_CMD_TIMEOUT_S=1)  # mcprm's own start (torch, the model) takes longer
    assert r.returncode == 3 and "stopped at the call's time limit" in r.stdout, r.stdout
    assert not list((tmp / "out").glob("gen-*")) and not (tmp / "w" / "gen" / "t0000.jsonl.gz").exists()
    call = json.loads((tmp / "out" / "call.json").read_text())
    assert call["rc"] == 3 and call["stages"][-1]["rc"] == 3

    # one chunk, landed; then a fresh machine (new work folder) makes only the other
    r = _cpu_run(tmp, "gen", "t0000")
    assert r.returncode == 0, r.stdout + r.stderr
    first = (tmp / "out" / "gen-t0000.jsonl.gz").read_bytes()
    st = _land(tmp)
    assert st["gen"]["t0000"]["solutions"] == 4
    tmp_w2 = tmp / "w2"
    r = _cpu_run(tmp, "setup", "+", "gen", DR_WORK=tmp_w2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gen t0000: done before" in r.stdout
    assert sorted(p.name for p in (tmp / "out").glob("gen-*")) == ["gen-h0000.jsonl.gz"]
    st = _land(tmp)
    assert (tmp / "results" / "gen" / "t0000.jsonl.gz").read_bytes() == first  # kept, never made again
    assert st["gen"]["h0000"]["solutions"] == 12

    # a corpus labeled to 2 solutions, then refreshed to 4: two versions named by their input sizes
    r = _cpu_run(tmp, "label", "def", "2", "+", "label", "def", "4", DR_WORK=tmp_w2)
    assert r.returncode == 0, r.stdout + r.stderr
    st = _land(tmp)
    assert st["corpora"]["def"]["versions"] == {"2": 1, "4": 2}
    assert dr.corpus_versions(tmp_w2 / "c_def") == {2: 1, 4: 2}
    r = _cpu_run(tmp, "label", "def", "4", DR_WORK=tmp_w2)
    assert r.returncode == 0 and "done before" in r.stdout

    # a row's PRM trained on version 1; best-of-N over one held-out problem cannot choose an aggregation on 30%
    # of the problems and fails inside a pipe (`bestofn | tee`): the stage and the call fail with it
    r = _cpu_run(tmp, "train", "def2", DR_WORK=tmp_w2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--version 1 " in (tmp_w2 / "rows" / "def2" / "commands.sh").read_text()
    held = tmp_w2 / "in" / "heldout8.jsonl"
    r = _py(tmp, "input", tmp_w2, "heldout", held, DR_PLAN_FILE=tmp / "plan.json")
    assert r.returncode == 0, r.stderr
    whole = held.read_text()
    held.write_text("".join(whole.splitlines(keepends=True)[:2]))
    r = _cpu_run(tmp, "measure", "def2", DR_WORK=tmp_w2)
    assert r.returncode not in (0, 3), r.stdout
    assert "both sides need problems" in r.stdout  # bestofn's own error: the pipe's failure, not an earlier one
    assert not (tmp / "out" / "row-def2.tgz").exists()
    assert json.loads((tmp / "out" / "call.json").read_text())["rc"] == r.returncode
    held.write_text(whole)
    r = _cpu_run(tmp, "measure", "def2", DR_WORK=tmp_w2)
    assert r.returncode == 0, r.stdout + r.stderr
    st = _land(tmp)
    row = st["rows"]["def2"]
    assert row["version"] == 1 and row["bestofn_n"] == 2 and row["code"] == "a" * 40
    assert 0 <= row["f1"] <= 1
    kept = tmp / "results" / "rows" / "def2"
    assert {"card.json", "eval_pb.json", "metrics_pb.json", "bestofn.json", "commands.sh", "train.log"} <= {
        p.name for p in kept.iterdir()}
    # prm_metrics.py reads the scored corpus as `mcprm eval` does: the same F1 at the PRM's threshold, the same steps
    ev = json.loads((kept / "eval_pb.json").read_text())
    met = json.loads((kept / "metrics_pb.json").read_text())
    assert met["f1_own"] == ev["f1"] and met["steps_judged"] == ev["steps_compared"]
    assert met["solutions"] == ev["solutions"] == 6
    # the step scores come back (the PRM does not): one line per scored solution
    with gzip.open(kept / "scores_bo.jsonl.gz", "rt") as f:
        assert sum(1 for _ in f) == st["gen"]["h0000"]["solutions"]
    with gzip.open(kept / "scores_pb.jsonl.gz", "rt") as f:
        assert all(len(json.loads(x)["prm_score"]) > 0 for x in f)
    assert not (tmp_w2 / "prm_def2").exists()  # the PRM is removed once measured
    r = _cpu_run(tmp, "row", "def2", DR_WORK=tmp_w2)
    assert r.returncode == 0 and "done before" in r.stdout

    # the held-aside part, read once at the end: its files land beside the row's, which stay as they were
    r = _cpu_run(tmp, "final", "def2", DR_WORK=tmp_w2)
    assert r.returncode == 0, r.stdout + r.stderr
    st = _land(tmp)
    assert st["rows"]["def2"]["final"]["f1"] is not None
    assert {"final_eval_pb.json", "final_metrics_pb.json", "final_card.json", "final_commands.sh"} <= {
        p.name for p in kept.iterdir()}
    assert json.loads((kept / "eval_pb.json").read_text()) == ev and st["rows"]["def2"]["f1"] == ev["f1"]
    assert "aside" in (kept / "final_commands.sh").read_text()
    # a second look is refused before anything is trained, on this machine or a fresh one
    r = _cpu_run(tmp, "final", "def2", DR_WORK=tmp_w2)
    assert r.returncode == 2 and "once per row" in r.stdout
    r = _cpu_run(tmp, "setup", "+", "final", "def2", DR_WORK=tmp / "w3")
    assert r.returncode == 2 and "once per row" in r.stdout
    assert not (tmp / "w3" / "final").exists()


def test_a_corpus_may_pin_its_own_label_code_and_the_rest_keep_theirs():
    st = {"code": {"label": "a" * 40, "train": "b" * 40, "label-ps": "c" * 40}}
    assert dr.code_of(st, "label-ps") == "c" * 40  # its own
    assert dr.code_of(st, "label-def") == "a" * 40  # the corpora's
    assert dr.code_of(st, "train") == "b" * 40
    with pytest.raises(SystemExit):
        dr.code_of(st, "judge")
    # the pinned STATE.json: every role's snapshot is made by `prepare`, and the per-step corpus has its own code
    real = dr.read_state()
    assert dr.code_of(real, "label-ps") != dr.code_of(real, "label-def") == real["code"]["label"]
