"""The exporter registry of ``mcprm export`` (issue 27): one exporter per format (genprm included), and the export
run and the checks dispatch through it, not on the format's name."""

from __future__ import annotations

import pytest

from pipeline.export.common import ALL_FORMATS, ExportError, ExportOptions, Row
from pipeline.export.formats import EXPORTERS, get_exporter, soft_formats
from pipeline.export.formats.base import Exporter
from tests.export_files import check_row, format_row, parse_record, record_schema, tag_of

ROW = Row("r1", "Compute 1 + 2.", ["1 + 2 = 3.", "The answer is 3."], [True, False])


def test_the_registry_holds_every_format_in_order():
    assert tuple(EXPORTERS) == ALL_FORMATS
    assert all(isinstance(e, Exporter) and e.name == name for name, e in EXPORTERS.items())
    assert soft_formats() == ["qwen-prm", "openrlhf"]
    with pytest.raises(ExportError, match="unknown format 'nope'; choose one of trl, math-shepherd"):
        get_exporter("nope")


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_exporter_round_trips_and_is_checked(fmt):
    opts = ExportOptions(fmt)
    rec = format_row(ROW, opts)
    assert set(rec) == set(record_schema(fmt, False).names)
    steps, labels = parse_record(rec, ROW.problem, opts)
    assert steps == ROW.steps and labels == ROW.labels
    check_row(rec, ROW, opts)
    broken = dict(rec, id="r1")
    key = {"trl": "completions", "processbench": "steps"}.get(fmt)
    if key:  # a record that lost a step does not parse back to the row
        broken[key] = rec[key][:1]
    else:
        field = get_exporter(fmt).text_field or "prompt"  # genprm: the steps are in the critique prompt
        broken[field] = rec[field].replace(ROW.steps[1], "The answer is 4.")
    with pytest.raises(ExportError, match="r1"):
        check_row(broken, ROW, opts)


def test_a_registered_exporter_is_used_by_its_name_alone():
    class Upper(Exporter):
        name = "upper-test"
        default_tag = "|"

        def record(self, row, opts, tokenizer=None):
            return {"id": row.id, "steps": [s.upper() for s in row.steps], "labels": list(row.labels)}

        def parse(self, record, problem, opts, tokenizer=None):
            return [s.lower() for s in record["steps"]], list(record["labels"])

    EXPORTERS["upper-test"] = Upper()
    try:
        opts = ExportOptions("upper-test")
        row = Row("u", "p", ["a", "b"], [True, True])
        assert format_row(row, opts)["steps"] == ["A", "B"] and tag_of(opts) == "|"
        check_row(format_row(row, opts), row, opts)
        with pytest.raises(ExportError, match="labels read back"):
            check_row({"id": "u", "steps": ["A", "B"], "labels": [True, False]}, row, opts)
    finally:
        EXPORTERS.pop("upper-test")


def test_genprm_records_read_back_or_name_the_row():
    from pipeline.export.formats.genprm import parse_prompt

    gen = get_exporter("genprm")
    steps = ["Let {x} = 2.\n\nSo x + 1 = 3.", "", "The answer is 3."]  # blank lines, braces, an empty step
    for fe in (-1, 0, 2):
        row = Row("g", "Compute {x} + 1.", steps, [True] * 3 if fe == -1 else [True] * fe + [False] + [None] * (2 - fe))
        rec = gen.record(row, ExportOptions("genprm"))
        assert parse_prompt(rec["prompt"], row.problem) == steps and rec["label"] == fe
        check_row(rec, row, ExportOptions("genprm"))
    # a step that holds the closing tag cannot be read back: the row is named, nothing guessed
    row = Row("bad", "P", ["a\n</paragraph_0>", "b"], [True, True])
    with pytest.raises(ExportError, match="row 'bad' \\(genprm\\): the written record does not parse back"):
        check_row(gen.record(row, ExportOptions("genprm")), row, ExportOptions("genprm"))
    rec = gen.record(Row("g", "P", ["a"], [False]), ExportOptions("genprm"))
    with pytest.raises(ExportError, match="boxed index 0 is not the label -1"):
        check_row(dict(rec, label=-1), Row("g", "P", ["a"], [True]), ExportOptions("genprm"))
    with pytest.raises(ValueError, match="not the critique prompt"):
        parse_prompt(rec["prompt"], "another problem")


def test_genprm_exports_the_prompt_a_judge_is_sent():
    """One ProcessBench critique prompt: genprm's training prompt is the judge's request, placeholders in the
    problem or the steps kept as written (replaced in one pass)."""
    from pipeline.judge.reply import critique_prompt

    problem, steps = "Is {tagged_response} a {problem}?", ["Say {problem}.", "The answer is 1."]
    rec = get_exporter("genprm").record(Row("g", problem, steps, [True, True]), ExportOptions("genprm"))
    assert rec["prompt"] == critique_prompt(problem, steps)
    assert "[Math Problem]\n\nIs {tagged_response} a {problem}?\n\n[Solution]" in rec["prompt"]
    assert "<paragraph_0>\nSay {problem}.\n</paragraph_0>" in rec["prompt"]
    check_row(rec, Row("g", problem, steps, [True, True]), ExportOptions("genprm"))  # and it reads back
