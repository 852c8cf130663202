"""``mcprm judge`` and ``mcprm export --consensus`` through the real CLI (in this process, and a subprocess where the run is killed) on a real small corpus (the
bundled model's labels of bundled solutions), with a scripted judge behind the fake OpenAI server
(tests/rollouts/_fake_openai_server.py --script): agreement and disagreement, unparseable replies kept null and
counted, resume after a killed run, export row counts, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pipeline.corpus import read_corpus
from pipeline.judge.reply import tagged_paragraphs
from pipeline.judge.store import DROP_DISAGREE, DROP_MISSING, DROP_NULL, verify_judges
from tests.integration.conftest import invoke_mcprm, run_mcprm

SERVER = Path(__file__).resolve().parents[1] / "rollouts" / "_fake_openai_server.py"


def _replies(rows: list[dict]) -> dict[str, tuple[str, str]]:
    """Per solution id: (what the scripted judge says, the kind: agree | disagree | unparseable)."""
    out = {}
    for i, r in enumerate(rows):
        fe, kind = r["first_error"], ("agree", "disagree", "unparseable", "agree-words")[i % 4]
        if kind == "agree":
            out[r["id"]] = (f"Let me check each paragraph.\n\nThe answer is \\boxed{{{fe}}}.", "agree")
        elif kind == "agree-words":
            text = "All paragraphs are correct." if fe == -1 else f"The earliest error is in paragraph {fe}."
            out[r["id"]] = (text, "agree")
        elif kind == "disagree":
            out[r["id"]] = (f"\\boxed{{{0 if fe == -1 else -1}}}", "disagree")
        else:
            out[r["id"]] = ("Hard to say; maybe paragraph 1, maybe 2.", "unparseable")
    return out


@pytest.fixture
def corpus(reference_run, tmp_path):
    """A copy of the reference run's corpus (8 bundled solutions labeled by the bundled model, K=2)."""
    out = tmp_path / "out"
    shutil.copytree(reference_run[0], out)
    rows = read_corpus(str(out)).to_pylist()
    assert len(rows) >= 4
    return str(out), rows


@pytest.fixture
def judge_server(corpus, tmp_path):
    _, rows = corpus
    replies = _replies(rows)
    script = {"rules": [{"contains": [f"[Math Problem]\n\n{r['problem']}\n\n", tagged_paragraphs(r["steps"])],
                         "reply": replies[r["id"]][0]} for r in rows],
              "default": "no rule matched this prompt"}
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    proc = subprocess.Popen([sys.executable, str(SERVER), "unused-model", "--script", str(path), "--fail-status", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}", replies
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _posts(url: str) -> int:
    with urllib.request.urlopen(url + "/stats", timeout=10) as r:
        return json.loads(r.read())["posts"]


def _judge(out: str, url: str, *extra: str, env: dict | None = None):
    # in this process, except where the run is killed (MCPRM_FAULT SIGKILLs its process): a real subprocess then
    run = run_mcprm if env and "MCPRM_FAULT" in env else invoke_mcprm
    return run("judge", out, "--backend", "openai", "--base-url", url + "/v1", "--model", "tiny",
               "--judge-id", "scripted", "--batch-size", "3", *extra, env=env)


def test_judge_summary_stats_and_consensus_export(corpus, judge_server, tmp_path):
    out, rows = corpus
    url, replies = judge_server
    before = {p: p.read_bytes() for p in Path(out).rglob("*") if p.is_file()}
    r = _judge(out, url)
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = [replies[row["id"]][1] for row in rows]
    agree, disagree, null = kinds.count("agree"), kinds.count("disagree"), kinds.count("unparseable")
    assert f"judged {len(rows)} solutions" in r.stdout and "unparseable replies" in r.stdout
    assert _posts(url) == len(rows)  # one request per solution, temperature 0
    # the committed corpus is untouched, and still verifies
    assert all(p.read_bytes() == data for p, data in before.items())
    assert invoke_mcprm("verify", out).returncode == 0
    v = invoke_mcprm("judge", out, "--verify")
    assert v.returncode == 0 and "OK" in v.stdout, v.stdout + v.stderr

    s = invoke_mcprm("stats", out, "--json")
    assert s.returncode == 0, s.stderr
    (j,) = json.loads(s.stdout)["judges"]
    assert (j["judge_id"], j["judged"], j["agree"], j["disagree"], j["unparseable"]) == \
        ("scripted", len(rows), agree, disagree, null)
    assert j["agreement_rate"] == pytest.approx(agree / (agree + disagree))
    assert "judge scripted" in invoke_mcprm("stats", out).stdout

    exp = tmp_path / "exp"
    e = invoke_mcprm("export", out, "--format", "processbench", "--output", str(exp), "--consensus", "scripted",
                  "--json")
    assert e.returncode == 0, e.stdout + e.stderr
    res = json.loads(e.stdout)
    undecided = res["skipped"].pop("undecided", 0)  # processbench's own: an unlabeled step before the error
    assert res["rows"] + undecided == agree and res["corpus_rows"] == len(rows), res["skipped"]
    assert res["skipped"] == {k: n for k, n in ((DROP_DISAGREE, disagree), (DROP_NULL, null)) if n}
    from tests.export_files import load_export

    got = {x["id"]: x["label"] for x in load_export(str(exp))}
    assert len(got) == res["rows"]
    assert all(replies[row["id"]][1] == "agree" and got[row["id"]] == row["first_error"]
               for row in rows if row["id"] in got)
    t = invoke_mcprm("export", out, "--format", "trl", "--output", str(tmp_path / "exp2"), "--consensus", "auto")
    assert t.returncode == 0 and f"rows not exported ({DROP_NULL})" in t.stdout, t.stdout + t.stderr


def test_killed_judge_run_resumes_without_duplicates(corpus, judge_server):
    out, rows = corpus
    url, _ = judge_server
    r = _judge(out, url, env={"MCPRM_FAULT": "judge-part-written:1"})  # SIGKILL right after the first part
    assert r.returncode != 0
    jdir = Path(out) / "judge" / "scripted"
    assert sorted(p.name for p in jdir.glob("part-*.parquet")) == ["part-00000.parquet"]
    assert _posts(url) == 3
    # export before the run finished: the unjudged rows are dropped and counted
    e = invoke_mcprm("export", out, "--format", "trl", "--output", str(Path(out).parent / "early"), "--consensus",
                  "scripted", "--json")
    assert e.returncode == 0, e.stderr
    assert json.loads(e.stdout)["skipped"][DROP_MISSING] == len(rows) - 3
    again = _judge(out, url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"judged {len(rows) - 3} solutions" in again.stdout and "3 judged before" in again.stdout
    assert _posts(url) == len(rows)  # every solution asked exactly once over both runs
    assert verify_judges(out) == ([], {"scripted": len(rows)})
    done = _judge(out, url)
    assert done.returncode == 0 and "judged 0 solutions" in done.stdout and _posts(url) == len(rows)


def test_server_error_keeps_the_written_parts(corpus, judge_server):
    out, rows = corpus
    url, _ = judge_server
    assert _judge(out, url, "--limit", "3").returncode == 0
    with urllib.request.urlopen(url + "/arm-failures/1", timeout=10):  # the next request: HTTP 400, not retried
        pass
    r = _judge(out, url)
    assert r.returncode == 1 and "the judge backend failed" in r.stderr and "3 judgments written before are kept" \
        in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert verify_judges(out) == ([], {"scripted": 3})
    again = _judge(out, url)
    assert again.returncode == 0 and "3 judged before" in again.stdout, again.stdout + again.stderr
    assert verify_judges(out) == ([], {"scripted": len(rows)})


def test_bad_input_is_a_clear_error_and_writes_nothing(corpus, judge_server, tmp_path):
    out, _ = corpus
    url, _ = judge_server
    missing = tmp_path / "no-corpus"
    r = _judge(str(missing), url)
    assert r.returncode == 1 and "not an mcprm corpus" in r.stderr and "Traceback" not in r.stderr
    assert not missing.exists()
    r = invoke_mcprm("judge", out, "--backend", "openai", "--model", "tiny")
    assert r.returncode == 1 and "--base-url" in r.stderr
    r = invoke_mcprm("judge", out, "--base-url", url + "/v1")
    assert r.returncode == 1 and "--model is required" in r.stderr
    assert not (Path(out) / "judge").exists()

    exp = tmp_path / "exp"
    r = invoke_mcprm("export", out, "--format", "trl", "--output", str(exp), "--consensus", "nope")
    assert r.returncode == 1 and "no judge results" not in r.stderr and "no judge 'nope'" in r.stderr, r.stderr
    assert not exp.exists()
    assert _judge(out, url).returncode == 0
    r = invoke_mcprm("export", out, "--format", "trl", "--output", str(exp), "--consensus", "nope")
    assert r.returncode == 1 and "judges there: scripted" in r.stderr and not exp.exists()
    r = invoke_mcprm("judge", out, "--summary", "--judge-id", "nope")
    assert r.returncode == 1 and "no judge 'nope'" in r.stderr
    # another judge under the same id is refused; the judgments already there stay
    r = _judge(out, url, "--max-new-tokens", "7")
    assert r.returncode == 1 and "holds the judgments of another judge" in r.stderr
    assert verify_judges(out)[0] == []
