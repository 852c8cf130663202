"""Numbers a newcomer can read: each says what it is computed on. The report's MC histogram draws sampled steps
only (never an unsampled step as 0.0) and says how many; unsampled steps show "—" in the examples; the example
heading says its first error is the labels'; `eval` says what its Brier score covers and what 0.5 everywhere
scores; `export` says why its step counts differ from `stats`'."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from pipeline.commands.report import build_report
from pipeline.corpus import read_corpus
from tests.pipeline.prm_fixtures import make_corpus


def test_report_draws_sampled_steps_only_and_says_how_many(tmp_path):
    make_corpus(tmp_path / "out")
    rows = read_corpus(str(tmp_path / "out")).to_pylist()
    steps = sum(len(r["steps"]) for r in rows)
    sampled = sum(1 for r in rows for i, v in enumerate(r["mc_value"]) if v is not None and r["mc_total"][i] > 0)
    answer_only = sum(1 for r in rows for i, v in enumerate(r["mc_value"]) if v is not None and r["mc_total"][i] == 0)
    assert answer_only > 0  # last steps valued by the solution's answer alone: the fixture has them
    res = build_report(str(tmp_path / "out"), str(tmp_path / "rep"))
    page = Path(res.html).read_text()
    assert f"over the {sampled:,} of {steps:,} steps that were sampled" in page, page[-3000:]
    assert f"{answer_only:,} last steps valued by the solution" in page
    lab = res.stats["labels"]
    assert f"positive rate (of the {lab['positive'] + lab['negative']:,} labeled steps)" in page
    # s1's last step ("The answer is 5") has no draws: "—", not its answer's 1.00
    s1 = page[page.index("s1: "):]
    s1 = s1[: s1.index("</table>")]
    assert re.search(r"The answer is 5</td><td[^>]*>[a-z]+</td><td>—</td>", s1), s1
    assert "1.00" not in s1.split("The answer is 5")[1]
    assert "the MC labels&#x27; first error, not a checker&#x27;s" in page or \
        "the MC labels' first error, not a checker's" in page


def test_eval_says_what_brier_is_computed_on(tmp_path):
    make_corpus(tmp_path / "out")
    from pipeline.export import export_corpus

    ref = export_corpus(str(tmp_path / "out"), "processbench", str(tmp_path / "ref"), file_format="jsonl").files[0]
    r = CliRunner().invoke(app, ["eval", str(tmp_path / "out"), "--reference", ref], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "always 0.5 = 0.25" in r.output, r.output
    m = re.search(r"brier (\d\.\d+): mean squared error of mc_value against the reference's 0/1, on the (\d+) "
                  r"steps up to the reference's first error that have an mc_value", r.output)
    assert m and int(m.group(2)) > 0, r.output
    r = CliRunner().invoke(app, ["eval", str(tmp_path / "out"), "--reference", ref, "--json"])
    import json

    assert json.loads(r.output)["brier_steps"] == int(m.group(2))


def test_export_says_why_its_counts_differ_from_stats(tmp_path):
    make_corpus(tmp_path / "out")
    r = CliRunner().invoke(app, ["stats", str(tmp_path / "out"), "--json"])
    import json

    lab = json.loads(r.output)["labels"]
    r = CliRunner().invoke(app, ["export", str(tmp_path / "out"), "--format", "trl", "--output",
                                 str(tmp_path / "trl")], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    pos, neg = map(int, re.search(r"steps: (\d+) positive, (\d+) negative", r.output).groups())
    assert (pos, neg) != (lab["positive"], lab["negative"])  # the fixture has labels after an unlabeled step
    text = " ".join(r.output.split())
    filled = int(re.search(r"note: (\d+) unlabeled steps exported as positive", text).group(1))
    assert filled == 1  # s6's hole, before a step that reached the answer
    assert (f"`mcprm stats` counts {lab['positive']} positive / {lab['negative']} negative labeled steps in the "
            f"corpus; this export leaves out {lab['positive'] + filled - pos} of the positive and "
            f"{lab['negative'] - neg} of the negative (and adds {filled} unlabeled steps as positive") in text, r.output
    assert "each row cut at its first unlabeled step" in text
