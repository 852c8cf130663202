"""What a new user hits in the first hour (issue 14): rows too long for the model, own data that is silently
wrong (warnings), the executor chosen by what the machine has, help with defaults."""

from __future__ import annotations

import json
import os

import pytest

from pipeline.execution import executors
from pipeline.input import InputError
from pipeline.run import label

from .conftest import invoke_mcprm, make_cfg, run_mcprm


def _rows(path):
    return [json.loads(x) for x in open(path).read().splitlines()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_overlong_row_found_before_any_rollout(small_input, tmp_path):
    rows = _rows(small_input)[:3]
    long = dict(rows[0], id="long-one", problem="Compute " + " + ".join(["1"] * 400) + ".")  # > 512 tokens
    inp = _write(tmp_path / "in.jsonl", rows + [long])
    out = str(tmp_path / "out")
    with pytest.raises(InputError) as e:
        label(make_cfg(inp, out))
    msg = str(e.value)
    assert f"{inp} line 4" in msg and "tokens" in msg and "context of 512 tokens" in msg, msg
    assert "max_new_tokens 48" in msg and "--skip-bad" in msg
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    assert not os.path.isdir(os.path.join(out, "data")) or not any(
        f.endswith(".parquet") for _, _, fs in os.walk(os.path.join(out, "data")) for f in fs)

    res = label(make_cfg(inp, out, skip_bad=True))
    assert res.added == 3 and res.rejected == 1
    rej = [json.loads(x) for x in open(os.path.join(out, "rejects", "v00001.jsonl")).read().splitlines()]
    assert len(rej) == 1 and rej[0]["row"] == 3 and rej[0]["file"] == inp and "prompt too long" in rej[0]["reason"]


def test_own_data_warnings_and_gsm8k_splitter(tmp_path, monkeypatch):
    gsm = [
        {"problem": f"Natalia sold clips to {n} of her friends in April, and then she sold half as many clips in "
                    "May. How many clips did Natalia sell altogether in April and May?",
         "answer": str(n + n // 2),
         "solution": f"Natalia sold {n}/2 = <<{n}/2={n // 2}>>{n // 2} clips in May.\n"
                     f"Natalia sold {n}+{n // 2} = <<{n}+{n // 2}={n + n // 2}>>{n + n // 2} clips altogether.\n"
                     f"#### {n + n // 2}"}
        for n in (48, 60, 74, 86)
    ]
    inp = _write(tmp_path / "gsm.jsonl", gsm)
    # 1) newline splitter on GSM8K text: the answer line is a step, annotations stay; the model cannot solve
    monkeypatch.setattr(executors, "cpu_count", lambda: 2)
    monkeypatch.setattr(executors, "gpu_count", lambda: 0)
    res = label(make_cfg(inp, str(tmp_path / "nl"), splitter="newline", k=4, max_new_tokens=32, executor="auto"))
    codes = {w["code"]: w["message"] for w in res.manifest["warnings"]}
    assert "answer-line-step" in codes and "--splitter gsm8k" in codes["answer-line-step"], codes
    assert "calculator annotations" in codes["answer-line-step"]
    assert "no-success" in codes and "cannot solve" in codes["no-success"], res.manifest.get("rollout_success")
    assert res.manifest["execution"]["executor"] == "local"
    assert "small machine" in res.manifest["execution"]["reason"]
    # 2) blank-line splitter on newline-separated text: every solution is one step
    res = label(make_cfg(inp, str(tmp_path / "bl"), splitter="blank-line", k=2, max_new_tokens=16))
    codes = {w["code"]: w["message"] for w in res.manifest["warnings"]}
    assert "one-step" in codes and "4 of 4 solutions split into one step" in codes["one-step"], codes
    assert res.manifest["execution"] == {"executor": "local", "reason": "--executor local given"}
    # 3) the gsm8k preset: no annotations, no answer-line step, the final answer kept in the last step
    from pipeline.input.split import split_solution

    steps = split_solution(gsm[0]["solution"], "gsm8k")
    assert steps == ["Natalia sold 48/2 = 24 clips in May.",
                     "Natalia sold 48+24 = 72 clips altogether. The answer is 72."]
    res = label(make_cfg(inp, str(tmp_path / "gsm"), splitter="gsm8k", k=2, max_new_tokens=16))
    assert "answer-line-step" not in {w["code"] for w in res.manifest["warnings"]}


def test_cli_summary_names_executor_and_warnings(tmp_path):
    rows = [{"problem": "Compute 2 + 3.", "answer": "5", "solution": "2 + 3 = 5\nThe answer is \\boxed{5}."}] * 1
    inp = _write(tmp_path / "in.jsonl", rows)
    r = invoke_mcprm("label", "--input", inp, "--output", str(tmp_path / "out"), "--k", "2", "--strategy", "per-step", "--max-new-tokens", "16",
                  "--executor", "local", "-q", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "executor: local (--executor local given)" in r.stdout
    assert "warning: 1 of 1 solutions split into one step" in r.stdout, r.stdout


def _option_block(help_text: str, opt: str) -> str:
    """The (rich-wrapped) help rows of one option, joined."""
    raw = help_text.splitlines()
    lines = [x.strip("│ ").strip() for x in raw]
    start = next(i for i, x in enumerate(lines) if x.startswith(opt + " ") or f", {opt} " in x)
    end = next((i for i in range(start + 1, len(raw)) if raw[i].startswith(("│ -", "╰"))), len(raw))
    return " ".join(" ".join(lines[start:end]).split())


def test_help_has_descriptions_defaults_and_choices():
    import typer

    from cli.main import app

    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        for p in cmd.params:
            if p.param_type_name == "option" and p.name != "help":
                assert (p.help or "").strip(), f"mcprm {name} {p.opts[0]} has no description"
    r = invoke_mcprm("label", "--help", env={"COLUMNS": "200"}, timeout=120)
    text = r.stdout
    for opt, default in (("--k", "20"), ("--temperature", "1.0"), ("--max-new-tokens", "256"), ("--shard-size", "64"),
                         ("--strategy", "binary-search"), ("--backend", "hf")):
        block = _option_block(text, opt)
        assert f"(default: {default})" in block, block
    assert "hf (transformers" in _option_block(text, "--backend")
    assert "per-step, binary-search, adaptive, sequential" in _option_block(text, "--strategy")
    assert "gsm8k" in _option_block(text, "--splitter")
    flag_lines = [x for x in text.splitlines() if "--no-" in x]
    assert flag_lines and not any("<bool>" in x or "BOOL" in x for x in flag_lines)


def test_failed_first_run_is_replaced_by_a_corrected_one(small_input, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(Exception):  # noqa: B017 - whatever the backend raises for a missing model
        label(make_cfg(small_input, out, model=str(tmp_path / "no-such-model")))
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    res = label(make_cfg(small_input, out))  # the corrected command: no --overwrite ceremony
    assert res.added > 0 and res.version == 1


def test_refused_rerun_names_the_field(small_input, tmp_path):
    from pipeline.config import ConfigError

    out = str(tmp_path / "out")
    label(make_cfg(small_input, out))
    with pytest.raises(ConfigError) as e:
        label(make_cfg(small_input, out, k=3))
    assert "k: 2 -> 3" in str(e.value)


def test_read_only_command_errors_do_not_talk_about_resuming(tmp_path):
    r = invoke_mcprm("stats", str(tmp_path / "nothing-here"), timeout=120)
    assert r.returncode != 0
    assert "rerun the same command to resume" not in r.stderr and "Nothing was committed" not in r.stderr, r.stderr


def test_glob_matching_nothing_suggests_input_format(tmp_path):
    from pipeline.input import InputSpec
    from tests.input_files import iter_solutions

    (tmp_path / "d").mkdir()
    with pytest.raises(InputError) as e:
        list(iter_solutions(InputSpec(paths=(str(tmp_path / "d" / "*.txt"),))))
    assert "--input-format" in str(e.value) or "no such file" in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------- issue 25
GSM_ROW = {"id": "gsm-1", "problem": "Natalia sold clips to 48 of her friends in April and half as many in May. "
                                     "How many clips did she sell?",
           "answer": "72", "steps": ["She sold 48/2 = 24 clips in May.", "48 + 24 = 72. The answer is 72."]}


@pytest.fixture(scope="module")
def corpora(small_input, tmp_path_factory):
    """Two small corpora made by `mcprm label` as a user runs it: 3 rows of the bundled (synthetic) sample, and
    one row of own data (a GSM8K-style word problem: no built-in checker)."""
    d = tmp_path_factory.mktemp("fh25")
    syn_in = _write(d / "syn.jsonl", _rows(small_input)[:3])
    own_in = _write(d / "own.jsonl", [GSM_ROW])
    out = {}
    for name, inp in (("synthetic", syn_in), ("own", own_in)):
        o = str(d / f"{name}-out")
        r = run_mcprm("label", "--input", inp, "--output", o, "--k", "2", "--max-new-tokens", "16",
                      "--strategy", "per-step", "--executor", "local", "--progress", timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        out[name] = (o, r)
    return out


def test_label_prints_progress_once_and_what_to_run_next(corpora):
    out, r = corpora["synthetic"]
    final = [x for x in r.stderr.splitlines() if x.startswith("[mcprm] 3/3 solutions")]
    assert len(final) == 1, r.stderr  # piped: the final line once
    assert "ETA 0 s" in final[0]
    assert "0 rollouts, 0 tok/s" not in r.stderr, r.stderr
    nxt = r.stdout[r.stdout.index("next:"):]
    for cmd in ("stats", "eval", "export", "report", "train"):
        assert f"mcprm {cmd} {out}" in nxt, nxt
    # the path on from the labels: a PRM, new solutions to score (on CPU: the bundled problems), best-of-N
    at = [nxt.index(f"mcprm {cmd} ") for cmd in ("stats", "eval", "export", "report", "train", "generate",
                                                  "score", "bestofn")]
    assert at == sorted(at), nxt
    assert f"mcprm score {out}-prm --input {out}-new8.jsonl --output {out}-scored" in nxt, nxt
    assert f"mcprm bestofn {out}-scored" in nxt, nxt
    assert "--reference FILE" not in nxt  # the bundled task: its exact checker needs no file
    own, r_own = corpora["own"]
    assert f"mcprm eval {own} --reference FILE" in r_own.stdout, r_own.stdout


def test_eval_without_reference(corpora):
    syn, _ = corpora["synthetic"]
    r = invoke_mcprm("eval", syn, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reference"] == "synthetic"
    own, _ = corpora["own"]
    for extra in ((), ("--reference", "synthetic"), ("--label-rule", "all")):
        r = invoke_mcprm("eval", own, *extra, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith("error:") and "--reference FILE" in r.stderr, r.stderr
        assert "gsm-1" in r.stderr and "ProcessBench" in r.stderr and "Traceback" not in r.stderr


def test_output_that_is_a_file_is_refused_and_nothing_is_left(corpora, tmp_path):
    syn, _ = corpora["synthetic"]
    f = tmp_path / "results.txt"
    f.write_text("keep me\n")
    for args in (("label", "--input", _write(tmp_path / "in.jsonl", [GSM_ROW]), "--output", str(f)),
                 ("export", syn, "--output", str(f), "--overwrite"),
                 ("report", syn, "--output", str(f))):
        r = invoke_mcprm(*args, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith(f"error: {f} is a file, not a folder"), r.stderr
        assert "--output" in r.stderr and "folder" in r.stderr
        assert f.read_text() == "keep me\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "results.txt"], list(tmp_path.iterdir())
    r = invoke_mcprm("label", "--output", str(f / "sub"), timeout=120)  # a folder inside a file
    assert r.returncode == 1 and f"{f} is a file, not a folder" in r.stderr, r.stderr


def test_device_is_checked_before_any_work(tmp_path):
    from rollouts.devices import nvidia_gpus

    out = tmp_path / "out"
    r = invoke_mcprm("label", "--output", str(out), "--device", "gpu", timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("error: --device 'gpu' is not a device name"), r.stderr
    assert "cpu" in r.stderr and "Traceback" not in r.stderr and "RuntimeError" not in r.stderr
    assert not out.exists()
    if nvidia_gpus():
        pytest.skip("this machine has a GPU: the no-GPU messages are not what it says")
    for args, says in ((("--device", "cuda"), "this machine has no GPU"),
                       (("--backend", "vllm"), "this machine has none")):
        r = invoke_mcprm("label", "--output", str(out), *args, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert says in r.stderr and "rerun the same command" not in r.stderr, r.stderr
        assert "pip install" not in r.stderr  # no multi-GB install suggested on a machine that cannot use it
        assert not out.exists()  # no OUT/data/v00001/_staged left behind
    r = invoke_mcprm("plan", "--device", "cuda", timeout=120)
    assert r.returncode == 1 and "this machine has no GPU" in r.stderr, r.stderr


def test_long_problem_is_named_as_the_problem(tmp_path):
    rows = _rows(_sample_path())[:2] + [{"id": "big", "problem": "Compute " + "1 + " * 12_500 + "1.",
                                         "answer": "12501", "steps": ["1 + 1 = 2"]}]
    inp = _write(tmp_path / "in.jsonl", rows)
    r = run_mcprm("label", "--input", inp, "--output", str(tmp_path / "out"), "--k", "2", timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith(f"error: {inp} line 3, field 'problem': prompt too long"), r.stderr
    assert "Token indices sequence length" not in r.stderr, r.stderr  # transformers' own warning, not shown


def _sample_path() -> str:
    from pipeline.bundled import SAMPLE_PATH

    return str(SAMPLE_PATH)


def test_help_reads_at_80_columns():
    import typer

    from cli.main import app
    from pipeline.config import option_default

    r = invoke_mcprm("label", "--help", env={"COLUMNS": "80"}, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) < 200, len(lines)  # was 398
    assert all(len(x.rstrip()) <= 80 for x in lines)
    flat = " ".join(" ".join(x.strip("│╭╮╰╯─ ") for x in lines).split())
    cmd = typer.main.get_command(app).commands["label"]
    for p in cmd.params:  # every option's name whole (not folded mid-word), each choice whole
        for o in p.opts + p.secondary_opts:
            assert o in flat, o
    for choice in ("per-step", "binary-search", "adaptive", "sequential", "blank-line", "step-prefix", "gsm8k"):
        assert f" {choice}," in flat or f" {choice}." in flat, choice
    # the description column: at least 40 characters on the widest help line (was 17)
    widths = [len(x.split("  ")[-1].strip("│ ")) for x in lines if x.startswith("│ ")]
    assert max(widths) >= 40

    r = invoke_mcprm("plan", "--help", env={"COLUMNS": "80"}, timeout=120)
    text = r.stdout
    assert "per-step, binary-search, adaptive, sequential" in _option_block(text, "--strategy")
    for opt, name in (("--strategy", "strategy"), ("--k", "k"), ("--max-new-tokens", "max_new_tokens")):
        assert f"(default: {option_default(name)})" in _option_block(text, opt), (opt, _option_block(text, opt))


def test_errors_begin_the_same_in_every_command(tmp_path):
    for args in (("label", "--strategy", "nope"), ("plan", "--k", "abc"), ("export", str(tmp_path), "--format", "x"),
                 ("eval", "--no-such-option"), ("report", str(tmp_path / "missing")), ("stats", str(tmp_path)),
                 ("plan", "--pilot", "1"), ("no-such-command",)):
        r = invoke_mcprm(*args, timeout=120)
        assert r.returncode != 0, args
        assert r.stderr.startswith("error: "), (args, r.stderr)
        assert "Error" not in r.stderr.split("\n")[0][:8] and "╭" not in r.stderr, (args, r.stderr)


def test_plan_gives_exact_counts_when_the_pilot_is_the_whole_input(small_input, tmp_path):
    inp = _write(tmp_path / "in.jsonl", _rows(small_input)[:3])
    r = invoke_mcprm("plan", "--input", inp, "--pilot", "8", "--k", "2", "--max-new-tokens", "16", "--json",
                  timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["exact"] and res["pilot"] == res["solutions"] == 3
    assert res["rollouts"]["total_ci"] == [res["rollouts"]["total"]] * 2
    r = invoke_mcprm("plan", "--input", inp, "--pilot", "8", "--k", "2", "--max-new-tokens", "16", timeout=300,
                  env={"COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    assert "95% CI" not in r.stdout and "exact" in r.stdout, r.stdout
