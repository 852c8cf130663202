"""LLM-judge consensus (issue 16, point 4): the reply parser, the prompt, judging with a scripted in-process backend
(storage, resume, a damaged part), the summary, and ``export --consensus``. The same through the real CLI and the
fake OpenAI server: tests/integration/test_judge.py."""

from __future__ import annotations

import os

import pytest

from pipeline.errors import McprmError
from pipeline.export import export_corpus
from pipeline.judge import run as J
from pipeline.judge import store as JS
from rollouts.base import Completion, Counters
from tests.export_files import load_export
from tests.pipeline.prm_fixtures import make_corpus

# (reply, n_steps, expected index or None, expected status)
PARSER_CASES = [
    ("\\boxed{3}", 5, 3, "ok"),
    ("The earliest error is in paragraph 2.\n\n\\boxed{2}", 5, 2, "ok"),
    ("All paragraphs are correct.\n\\boxed{-1}", 5, -1, "ok"),
    ("Final answer: $\\boxed{1}$", 5, 1, "ok"),
    ("\\boxed{ 4 }", 5, 4, "ok"),
    ("\\boxed{4.}", 5, 4, "ok"),
    ("\\boxed{\\text{paragraph\\_1}}", 5, 1, "ok"),
    ("\\boxed{paragraph_0}", 5, 0, "ok"),
    ("\\boxed{Paragraph 3}", 5, 3, "ok"),
    ("\\boxed{\\textbf{-1}}", 5, -1, "ok"),
    ("\\boxed{none}", 5, -1, "ok"),
    ("\\fbox{2}", 5, 2, "ok"),
    ("first \\boxed{1} then, on reflection, \\boxed{2}", 5, 2, "ok"),  # the last box is the answer
    ("<think>maybe \\boxed{1}</think>\nThe answer is \\boxed{0}", 5, 0, "ok"),  # after the reasoning
    ("<think>long thoughts with 7 and 9</think>\n-1", 5, -1, "ok"),
    ("3", 5, 3, "ok"),
    ("  -1  ", 5, -1, "ok"),
    ("paragraph_2", 5, 2, "ok"),
    ("<paragraph_4>", 5, 4, "ok"),
    ("None", 5, -1, "ok"),
    ("No error found.", 5, -1, "ok"),
    ("all correct", 5, -1, "ok"),
    ("Paragraph 0 is fine.\nTherefore, all paragraphs are correct.", 5, -1, "ok"),
    ("Answer: 2", 5, 2, "ok"),
    ("**Final Answer**: 1", 5, 1, "ok"),
    ("- Answer: paragraph 3 (0-indexed)", 5, 3, "ok"),
    ("Checked 4 paragraphs.\nThe earliest error occurs in paragraph 1.", 5, 1, "ok"),
    ("The earliest error is in paragraph 1 (the sum 2+3=6).", 5, 1, "ok"),
    ("So the answer is 0.", 5, 0, "ok"),
    ("Answer: none", 5, -1, "ok"),
    ("Final answer: -1", 5, -1, "ok"),
    # unparseable: kept null, never guessed
    ("", 5, None, "unparseable"),
    (None, 5, None, "unparseable"),
    ("I am not sure.", 5, None, "unparseable"),
    ("I think 3", 5, None, "unparseable"),  # a number outside a clear answer line
    ("Paragraph 1 computes 2 + 2 = 4 correctly.", 5, None, "unparseable"),
    ("The answer to the problem is 42 and paragraph 2 is wrong", 5, None, "unparseable"),
    ("Answer: 1 or 2", 5, None, "unparseable"),  # two numbers: ambiguous
    ("\\boxed{2, 3}", 5, None, "unparseable"),
    ("\\boxed{}", 5, None, "unparseable"),
    ("\\boxed{x = 5}\nThe earliest error is in paragraph 1.", 5, None, "unparseable"),  # the box decides
    ("\\boxed{3", 5, None, "unparseable"),  # unclosed
    ("Step 2 is wrong.", 5, None, "unparseable"),
    # out of range: null too
    ("\\boxed{7}", 5, None, "out_of_range"),
    ("\\boxed{5}", 5, None, "out_of_range"),
    ("\\boxed{-2}", 5, None, "out_of_range"),
    ("Answer: 3", 3, None, "out_of_range"),
]


@pytest.mark.parametrize(("reply", "n", "index", "status"), PARSER_CASES)
def test_parse_reply(reply, n, index, status):
    assert J.parse_reply(reply, n) == (index, status)


def test_majority():
    assert J.majority([2, 2, 1]) == (2, "ok")
    assert J.majority([2, None, None]) == (2, "ok")
    assert J.majority([-1, -1, 3, None]) == (-1, "ok")
    assert J.majority([1, 2]) == (None, "no_majority")
    assert J.majority([None, None]) == (None, "unparseable")


def test_prompt_is_processbench_style_and_keeps_braces():
    p = J.critique_prompt("Find {x} if x + 1 = 3.", ["x = 3 - 1", "x = 2"])
    assert "[Math Problem]\n\nFind {x} if x + 1 = 3.\n\n[Solution]" in p
    assert "<paragraph_0>\nx = 3 - 1\n</paragraph_0>\n\n<paragraph_1>\nx = 2\n</paragraph_1>" in p
    assert "indexed from 0" in p and "\\boxed{}" in p and "-1" in p


class Scripted:
    """A backend whose reply to a solution's prompt is ``script[problem]`` (a string, or a list: one per sample)."""

    name = "scripted"

    def __init__(self, script: dict[str, object], default: str = "I cannot tell."):
        self.script, self.default = script, default
        self.stats = Counters()
        self.prompts: list[str] = []
        self.closed = False

    def generate(self, requests, sampling):
        out = []
        for r in requests:
            self.prompts.append(r.prompt)
            reply = next((v for k, v in self.script.items() if f"[Math Problem]\n\n{k}\n\n" in r.prompt), self.default)
            replies = reply if isinstance(reply, list) else [reply] * r.n
            assert len(replies) == r.n
            out.append([Completion(t, 5) for t in replies])
        return out

    def close(self):
        self.closed = True


# make_corpus rows: s1 fe -1, s2 fe 1, s3 fe 0, s4 fe 2, s5 fe -1, s6 fe -1 (problems "Problem sN: compute it.")
def P(sid: str) -> str:  # noqa: N802
    return f"Problem {sid}: compute it."


SCRIPT = {
    P("s1"): "All paragraphs are correct. \\boxed{-1}",  # agree (no error)
    P("s2"): "The earliest error is in paragraph 1.\n\\boxed{1}",  # agree
    P("s3"): "\\boxed{1}",  # disagree: judge later than MC (0)
    P("s4"): "\\boxed{-1}",  # disagree: judge says no error, MC 2
    P("s5"): "I am not sure what to say.",  # unparseable
    P("s6"): "\\boxed{9}",  # out of range
}


def _settings(**kw) -> J.JudgeSettings:
    return J.JudgeSettings(model="scripted-judge", backend="openai", prompt_format="plain", **kw)


def test_judge_stores_agreement_disagreement_and_nulls(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    before = {p: open(os.path.join(out, p), "rb").read() for p in ("manifest.json", "data/v00001/part-00000.parquet")}
    be = Scripted(SCRIPT)
    res = J.judge_corpus(out, _settings(), lambda: be, batch_rows=4)
    assert res.judged == 6 and res.already == 0 and res.parts == 2 and be.closed
    assert res.statuses == {"ok": 4, "unparseable": 1, "out_of_range": 1}
    assert res.judge_id.startswith("scripted-judge-") and len(res.judge_id) == len("scripted-judge-") + 8
    s = res.summary
    assert (s["rows"], s["judged"], s["not_judged"], s["agree"], s["disagree"], s["unparseable"]) == (6, 6, 0, 2, 2, 2)
    assert s["agree_no_error"] == 1 and s["agreement_rate"] == 0.5 and s["agreement_rate_of_judged"] == 2 / 6
    assert s["disagreement"] == {"judge_earlier": 0, "judge_later": 1, "judge_no_error_mc_error": 1,
                                 "judge_error_mc_no_error": 0}
    # the corpus is untouched; the judge folder has its settings and checksummed parts
    for p, data in before.items():
        assert open(os.path.join(out, p), "rb").read() == data
    jdir = tmp_path / "out" / "judge" / res.judge_id
    names = sorted(os.listdir(jdir))
    assert names == ["judge.json", "part-00000.parquet", "part-00000.sum.json", "part-00001.parquet",
                     "part-00001.sum.json"]
    assert JS.verify_judges(out) == ([], {res.judge_id: 6})
    rows = {r["id"]: r for t in (JS.load_part(JS.open_store(str(jdir)), n) for n in names if n.endswith(".parquet"))
            for r in t.to_pylist()}
    assert rows["s5"]["judge_first_error"] is None and rows["s5"]["status"] == "unparseable"
    assert rows["s5"]["replies"] == [SCRIPT[P("s5")]] and rows["s5"]["votes"] == [None]
    assert rows["s6"]["judge_first_error"] is None and rows["s6"]["status"] == "out_of_range"
    assert rows["s2"]["judge_first_error"] == 1 and rows["s2"]["mc_first_error"] == 1
    assert all(r["corpus_version"] == 1 for r in rows.values())
    # the prompt: plain format, the ProcessBench request with this solution's tagged steps
    assert any("<paragraph_1>\n6 + 1 = 8\n</paragraph_1>" in p for p in be.prompts)


def test_resume_judges_only_the_rest_without_duplicates(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    first = Scripted(SCRIPT)
    r1 = J.judge_corpus(out, _settings(), lambda: first, batch_rows=2, limit=3)  # "interrupted" after 3
    assert r1.judged == 3 and r1.parts == 2
    second = Scripted(SCRIPT)
    r2 = J.judge_corpus(out, _settings(), lambda: second, batch_rows=2)
    assert r2.judge_id == r1.judge_id and r2.already == 3 and r2.judged == 3
    assert len(second.prompts) == 3 and not any(P(s) in p for p in second.prompts for s in ("s1", "s2", "s3"))
    assert JS.verify_judges(out) == ([], {r1.judge_id: 6})
    # nothing left: no backend is even built
    r3 = J.judge_corpus(out, _settings(), lambda: pytest.fail("backend built with nothing to judge"))
    assert r3.judged == 0 and r3.already == 6 and r3.summary["agree"] == 2


def test_damaged_part_is_judged_again_and_refused_by_readers(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    res = J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), batch_rows=3)
    part = tmp_path / "out" / "judge" / res.judge_id / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:-10])
    problems, _ = JS.verify_judges(out)
    assert len(problems) == 1 and "part-00000.parquet" in problems[0] and "checksum" in problems[0]
    with pytest.raises(J.JudgeError, match="checksum"):
        JS.ConsensusFilter(out, res.judge_id)
    be = Scripted(SCRIPT)
    again = J.judge_corpus(out, _settings(), lambda: be)
    assert again.repaired == 1 and again.judged == 3 and len(be.prompts) == 3
    assert JS.verify_judges(out) == ([], {res.judge_id: 6})


def test_mcprm_verify_checks_judge_parts(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    out = str(tmp_path / "out")
    make_corpus(out)
    res = J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), batch_rows=3)
    before = CliRunner().invoke(app, ["verify", out])  # (the fixture's shards are not schema-exact: not our case)
    assert "/judge/" not in before.output, before.output
    part = tmp_path / "out" / "judge" / res.judge_id / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:-10])
    bad = CliRunner().invoke(app, ["verify", out])
    assert bad.exit_code == 1 and f"judge/{res.judge_id}/part-00000.parquet" in bad.output, bad.output
    assert "checksum" in bad.output, bad.output


def test_samples_take_the_majority(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    script = {P("s1"): ["\\boxed{-1}", "\\boxed{0}", "\\boxed{-1}"], P("s2"): ["\\boxed{0}", "\\boxed{1}", "?"]}
    res = J.judge_corpus(out, _settings(samples=3, temperature=0.7), lambda: Scripted(script))
    assert res.statuses == {"ok": 1, "no_majority": 1, "unparseable": 4}
    assert res.summary["agree"] == 1 and res.summary["unparseable"] == 5


def test_bad_input_writes_nothing(tmp_path):
    missing = str(tmp_path / "nothing")
    with pytest.raises(McprmError, match="not an mcprm corpus"):
        J.judge_corpus(missing, _settings(), lambda: pytest.fail("no backend without a corpus"))
    assert not os.path.exists(missing)
    out = str(tmp_path / "out")
    make_corpus(out)
    with pytest.raises(J.JudgeError, match="--samples > 1 needs a --temperature"):
        J.judge_corpus(out, _settings(samples=2), lambda: None)
    with pytest.raises(J.JudgeError, match="judge id"):
        J.judge_corpus(out, _settings(), lambda: None, judge_id="../escape")
    assert not os.path.exists(tmp_path / "out" / "judge")

    class Down(Scripted):
        def generate(self, requests, sampling):
            raise RuntimeError("server down")

    down = Down({})
    with pytest.raises(J.JudgeError, match="server down.*0 judgments written before are kept"):
        J.judge_corpus(out, _settings(), lambda: down, judge_id="mine")
    assert down.closed and JS.list_judges(out) == []  # a run that judged nothing leaves no judge behind
    # another judge under a taken id is refused; the first one's judgments stay
    res = J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), judge_id="mine")
    with pytest.raises(J.JudgeError, match="holds the judgments of another judge"):
        J.judge_corpus(out, _settings(max_new_tokens=7), lambda: Scripted(SCRIPT), judge_id="mine")
    assert JS.verify_judges(out) == ([], {"mine": 6}) and res.judge_id == "mine"


def test_export_consensus_keeps_agreeing_rows(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    script = dict(SCRIPT)
    del script[P("s6")]  # s6 gets the default (unparseable) reply
    res = J.judge_corpus(out, _settings(), lambda: Scripted(script), judge_id="j1", limit=5)  # s6 not judged
    assert res.judged == 5
    r = export_corpus(out, "processbench", str(tmp_path / "exp"), consensus="j1")
    assert sorted(x["id"] for x in load_export(str(tmp_path / "exp"))) == ["s1", "s2"]
    assert r.rows == 2 and r.corpus_rows == 6 and r.rows + sum(r.skipped.values()) == r.corpus_rows
    assert r.skipped == {JS.DROP_DISAGREE: 2, JS.DROP_NULL: 1, JS.DROP_MISSING: 1}
    assert any("consensus with judge j1: 2 rows" in n for n in r.notes)
    # "auto": the only judge; trl format and --balance go through the same filter
    r2 = export_corpus(out, "trl", str(tmp_path / "exp2"), consensus="auto", balance="downsample")
    assert r2.rows == 2 and r2.rows + sum(r2.skipped.values()) == r2.corpus_rows == 6


def test_export_consensus_unknown_judge_writes_nothing(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    with pytest.raises(J.JudgeError, match="no judge results"):
        export_corpus(out, "trl", str(tmp_path / "exp"), consensus="auto")
    J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), judge_id="j1")
    with pytest.raises(J.JudgeError, match="no judge 'nope'.*judges there: j1"):
        export_corpus(out, "trl", str(tmp_path / "exp"), consensus="nope")
    assert not os.path.exists(tmp_path / "exp")


def test_prompts_too_long_are_not_sent_and_kept_null(tmp_path):
    out = str(tmp_path / "out")
    make_corpus(out)
    be = Scripted(SCRIPT)
    res = J.judge_corpus(out, _settings(), lambda: be, judge_id="j1", context_tokens=500,
                         count_tokens=lambda p: 1000 if P("s2") in p else 10)
    assert res.statuses == {"ok": 3, "unparseable": 1, "out_of_range": 1, "too_long": 1}
    assert len(be.prompts) == 5 and not any(P("s2") in p for p in be.prompts)
    s = res.summary
    assert (s["judged"], s["agree"], s["disagree"], s["unparseable"], s["too_long"]) == (6, 1, 2, 2, 1)
    r = export_corpus(out, "trl", str(tmp_path / "exp"), consensus="j1")
    assert r.rows == 1 and r.skipped == {JS.DROP_DISAGREE: 2, JS.DROP_NULL: 2, JS.DROP_TOO_LONG: 1}

    class Small(Scripted):  # like the hf backend: its own context and tokenizer
        max_positions = 50

        @staticmethod
        def tokenizer(text, add_special_tokens=False):
            return {"input_ids": text.split()}

    small = Small(SCRIPT)
    res = J.judge_corpus(out, _settings(), lambda: small, judge_id="j2", batch_rows=2)
    assert res.statuses == {"too_long": 6} and small.prompts == [] and res.summary["too_long"] == 6


def test_prompt_format_chat_when_the_tokenizer_has_a_template(tmp_path):
    import json
    import shutil

    from pipeline.bundled import MODEL_DIR

    tok = tmp_path / "tok"
    tok.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODEL_DIR / name, tok / name)
    cfg = json.loads((tok / "tokenizer_config.json").read_text())
    cfg["chat_template"] = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    (tok / "tokenizer_config.json").write_text(json.dumps(cfg))
    fmt = J.resolve_format(J.JudgeSettings(model="served-name", backend="openai", tokenizer=str(tok)))
    assert fmt.kind == "chat"
    assert fmt.header("CRITIQUE") == "<|user|>CRITIQUE\n<|assistant|>"
    # auto without a template, or an openai judge without --tokenizer: plain; chat asked for but impossible: an error
    assert J.resolve_format(J.JudgeSettings(model=str(MODEL_DIR), backend="hf")).kind == "plain"
    assert J.resolve_format(J.JudgeSettings(model="served-name", backend="openai")).kind == "plain"
    with pytest.raises(J.JudgeError, match="needs --tokenizer"):
        J.resolve_format(J.JudgeSettings(model="served-name", backend="openai", prompt_format="chat"))
    with pytest.raises(J.JudgeError, match="no chat template"):
        J.resolve_format(J.JudgeSettings(model=str(MODEL_DIR), backend="hf", prompt_format="chat"))
    # the format is part of the judge's identity: chat and plain judges get different ids
    chat = J.identity_hash(J.identity(J.JudgeSettings(model="m"), fmt))
    plain = J.identity_hash(J.identity(J.JudgeSettings(model="m"), J.resolve_format(J.JudgeSettings(model="m"))))
    assert chat != plain


def test_object_store_url(tmp_path):
    out = f"memory://mcprm-judge-test-{tmp_path.name}/out"
    make_corpus(out)
    res = J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), judge_id="m", batch_rows=4)
    assert (res.judged, res.parts, res.summary["agree"]) == (6, 2, 2)
    assert J.judge_corpus(out, _settings(), lambda: Scripted(SCRIPT), judge_id="m").already == 6
    assert JS.verify_judges(out) == ([], {"m": 6})
    r = export_corpus(out, "trl", f"memory://mcprm-judge-test-{tmp_path.name}/exp", consensus="m")
    assert r.rows == 2
