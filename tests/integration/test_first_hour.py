"""What a new user hits in the first hour (issue 14): rows too long for the model, own data that is silently
wrong (warnings), the executor chosen by what the machine has, help with defaults."""

from __future__ import annotations

import json
import os

import pytest

from pipeline.execution import executors
from pipeline.input import InputError
from pipeline.run import label

from .conftest import make_cfg, run_mcprm


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
    monkeypatch.setattr(executors, "_cpu_count", lambda: 2)
    monkeypatch.setattr(executors, "_gpu_count", lambda: 0)
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
    r = run_mcprm("label", "--input", inp, "--output", str(tmp_path / "out"), "--k", "2", "--strategy", "per-step", "--max-new-tokens", "16",
                  "--executor", "local", "-q", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "executor: local (--executor local given)" in r.stdout
    assert "warning: 1 of 1 solutions split into one step" in r.stdout, r.stdout


def _option_block(help_text: str, opt: str) -> str:
    """The (rich-wrapped) help rows of one option, joined."""
    raw = help_text.splitlines()
    lines = [x.strip("│ ").strip() for x in raw]
    start = next(i for i, x in enumerate(lines) if x.startswith(opt + " "))
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
    r = run_mcprm("label", "--help", env={"COLUMNS": "200"}, timeout=120)
    text = r.stdout
    for opt, default in (("--k", "20"), ("--temperature", "1.0"), ("--max-new-tokens", "256"), ("--shard-size", "64"),
                         ("--strategy", "binary-search"), ("--backend", "hf")):
        block = _option_block(text, opt)
        assert f"(default: {default})" in block, block
    assert "<hf|vllm|openai>" in text and "<per-step|binary-search|adaptive|sequential>" in text and "gsm8k" in text
    flag_lines = [x for x in text.splitlines() if "--no-" in x]
    assert flag_lines and not any("<bool>" in x for x in flag_lines)


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
    r = run_mcprm("stats", str(tmp_path / "nothing-here"), timeout=120)
    assert r.returncode != 0
    assert "rerun the same command to resume" not in r.stderr and "Nothing was committed" not in r.stderr, r.stderr


def test_glob_matching_nothing_suggests_input_format(tmp_path):
    from pipeline.input import InputSpec, iter_solutions

    (tmp_path / "d").mkdir()
    with pytest.raises(InputError) as e:
        list(iter_solutions(InputSpec(paths=(str(tmp_path / "d" / "*.txt"),))))
    assert "--input-format" in str(e.value) or "no such file" in str(e.value), str(e.value)
