import gzip
import itertools
import json
import logging
import uuid
from dataclasses import dataclass

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import input as ingest
from pipeline.input import (
    IngestStats,
    InputError,
    InputSpec,
    RejectsWriter,
    files,
    iter_rows,
    resolve_files,
)
from pipeline.solution import Solution, content_key
from tests.input_files import GSM8K, MATH, iter_solutions

GOOD = [
    {"problem": "What is 1+1?", "answer": "2", "steps": ["1+1=2.", "The answer is 2."]},
    {"problem": "What is 2*3?", "answer": 6, "solution": "2*3=6.\n\nThe answer is 6."},
    {"id": "q3", "problem": "What is 10-4?", "answer": "6", "steps": ["10-4=6", "So 6."]},
]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(r if isinstance(r, str) else json.dumps(r))
            f.write("\n")
    return str(path)


def write_parquet(path, rows, schema=None):
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), str(path))
    return str(path)


@dataclass
class Loaded:
    solutions: list[Solution]
    stats: IngestStats
    files: list[str]

    @property
    def n_rejected(self) -> int:
        return self.stats.rejected

    @property
    def n_duplicates(self) -> int:
        return self.stats.duplicates


def load_solutions(spec: InputSpec, skip_bad: bool = False, rejects_path: str | None = None) -> Loaded:
    """The whole input as a list, through the one real entry point (rejects to ``rejects_path``)."""
    stats = IngestStats()
    if not skip_bad:
        return Loaded(list(iter_solutions(spec, stats=stats)), stats, resolve_files(spec))
    with RejectsWriter(rejects_path) as rejects:
        sols = list(iter_solutions(spec, skip_bad=True, on_reject=rejects, stats=stats))
    return Loaded(sols, stats, resolve_files(spec))


def load(paths, **kw):
    return load_solutions(InputSpec(paths=tuple(paths) if not isinstance(paths, str) else (paths,), **kw))


def bad_message(tmp_path, line, **kw) -> str:
    """The InputError message for a file whose 2nd line is ``line`` (the 1st is good)."""
    p = tmp_path / "in.jsonl"
    with open(p, "wb") as f:
        f.write(json.dumps(GOOD[0]).encode() + b"\n")
        f.write(line if isinstance(line, bytes) else json.dumps(line).encode())
        f.write(b"\n")
    with pytest.raises(InputError) as ei:
        load(str(p), **kw)
    return str(ei.value)


# ------------------------------------------------------------------------------------ reading


def test_jsonl_steps_and_solution_rows(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", GOOD)
    res = load(p)
    sols = res.solutions
    assert [s.steps for s in sols] == [
        ("1+1=2.", "The answer is 2."),
        ("2*3=6.", "The answer is 6."),
        ("10-4=6", "So 6."),
    ]
    assert [s.answer for s in sols] == ["2", "6", "6"]  # an int answer becomes text
    assert sols[0].id == content_key("What is 1+1?", "2", ["1+1=2.", "The answer is 2."])
    assert sols[2].id == "q3"
    assert [s.source for s in sols] == [f"{p}:0", f"{p}:1", f"{p}:2"]
    assert res.stats.rows == 3 and res.stats.solutions == 3 and res.n_rejected == 0
    assert res.files == [p]


def test_ids_are_stable_across_jsonl_parquet_and_json(tmp_path):
    rows = [{"problem": r["problem"], "answer": str(r["answer"]), "steps": r.get("steps")} for r in GOOD[:1]]
    rows.append({"problem": "p", "answer": "1", "steps": [" a ", "b"]})
    j = load(write_jsonl(tmp_path / "a.jsonl", rows)).solutions
    pq_ = load(write_parquet(tmp_path / "a.parquet", rows)).solutions
    (tmp_path / "a.json").write_text(json.dumps(rows))
    arr = load(str(tmp_path / "a.json")).solutions
    assert [s.id for s in j] == [s.id for s in pq_] == [s.id for s in arr]
    assert j[1].steps == ("a", "b")  # steps are stripped before hashing
    assert [s.source for s in pq_] == [f"{tmp_path}/a.parquet:0", f"{tmp_path}/a.parquet:1"]


def test_parquet_reads_only_needed_columns_and_mixed_steps_solution(tmp_path):
    rows = [
        {"problem": "p1", "answer": "1", "steps": ["s1", "s2"], "solution": None, "blob": "x" * 100},
        {"problem": "p2", "answer": "2", "steps": None, "solution": "a\n\nb", "blob": "y"},
    ]
    sols = load(write_parquet(tmp_path / "x.parquet", rows)).solutions
    assert [s.steps for s in sols] == [("s1", "s2"), ("a", "b")]


def test_parquet_many_row_groups_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "BATCH_ROWS", 7)
    rows = [{"problem": f"p{i}", "answer": str(i), "steps": [f"s{i}"]} for i in range(50)]
    p = tmp_path / "x.parquet"
    pq.write_table(pa.Table.from_pylist(rows), str(p), row_group_size=8)
    sols = load(str(p)).solutions
    assert [s.answer for s in sols] == [str(i) for i in range(50)]
    assert sols[-1].source.endswith(":49")


def test_folder_with_jsonl_and_parquet_sorted_recursive(tmp_path):
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    write_jsonl(d / "b.jsonl", [GOOD[0]])
    write_parquet(d / "a.parquet", [{"problem": "pa", "answer": "1", "steps": ["x"]}])
    write_jsonl(d / "sub" / "c.jsonl", [{"problem": "pc", "answer": "1", "steps": ["y"]}])
    write_jsonl(d / ".hidden.jsonl", ["not json"])  # hidden: ignored
    (d / ".cache").mkdir()
    write_jsonl(d / ".cache" / "x.jsonl", ["not json"])  # inside a hidden folder: ignored
    (d / "README.md").write_text("# not data")
    (d / "_SUCCESS").write_text("")
    files = resolve_files(InputSpec(paths=(str(d),)))
    assert files == [str(d / "a.parquet"), str(d / "b.jsonl"), str(d / "sub" / "c.jsonl")]
    probs = [s.problem for s in load(str(d)).solutions]
    assert probs == ["pa", "What is 1+1?", "pc"]
    assert probs == [s.problem for s in load(str(d)).solutions]  # deterministic


def test_glob_and_given_order_kept_and_no_double_reading(tmp_path):
    for name in ("b", "a", "c"):
        write_jsonl(tmp_path / f"{name}.jsonl", [{"problem": name, "answer": "1", "steps": ["s"]}])
    write_jsonl(tmp_path / "z.txt", ["ignored"])
    assert [s.problem for s in load(str(tmp_path / "*.jsonl")).solutions] == ["a", "b", "c"]
    both = load([str(tmp_path / "c.jsonl"), str(tmp_path / "*.jsonl")])
    assert [s.problem for s in both.solutions] == ["c", "a", "b"]


def test_relative_paths_keep_the_users_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "in.jsonl", GOOD)
    assert resolve_files(InputSpec(paths=("data",))) == ["data/in.jsonl"]
    assert resolve_files(InputSpec(paths=("data/in.jsonl",))) == ["data/in.jsonl"]
    msg = bad_message(tmp_path / "data", {"problem": "p", "steps": ["s"]})
    assert msg.startswith(f"{tmp_path}/data/in.jsonl line 2, field 'answer': missing gold answer")


@pytest.fixture
def mem():
    root = f"memory://mcprm-test-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_memory_urls_folder_glob_and_rejects(mem):
    fs = fsspec.filesystem("memory")
    with fs.open(f"{mem}/in/a.jsonl", "wb") as f:
        f.write(b"".join(json.dumps(r).encode() + b"\n" for r in GOOD))
        f.write(b'{"problem": "p", "answer": null, "steps": ["s"]}\n')
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([{"problem": "pq", "answer": "3", "steps": ["t"]}]), buf)
    with fs.open(f"{mem}/in/b.parquet", "wb") as f:
        f.write(buf.getvalue().to_pybytes())
    files = resolve_files(InputSpec(paths=(f"{mem}/in",)))
    assert [f.rsplit("/", 1)[1] for f in files] == ["a.jsonl", "b.parquet"]
    assert all(f.startswith("memory://") for f in files)
    assert resolve_files(InputSpec(paths=(f"{mem}/in/*.parquet",))) == files[1:]
    with pytest.raises(InputError, match=r"a\.jsonl line 4, field 'answer'"):
        load(f"{mem}/in")
    res = load_solutions(InputSpec(paths=(f"{mem}/in",)), skip_bad=True, rejects_path=f"{mem}/out/rejects.jsonl")
    assert [s.problem for s in res.solutions] == [r["problem"] for r in GOOD] + ["pq"]
    with fs.open(f"{mem}/out/rejects.jsonl", "rb") as f:
        rejects = [json.loads(x) for x in f.read().splitlines()]
    assert len(rejects) == 1 and rejects[0]["row"] == 3 and rejects[0]["field"] == "answer"


def test_gzip_jsonl_and_json_with_lines(tmp_path):
    p = tmp_path / "in.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for r in GOOD:
            f.write(json.dumps(r) + "\n")
    assert len(load(str(p)).solutions) == 3
    q = write_jsonl(tmp_path / "lines.json", GOOD)  # .json holding JSON Lines
    assert len(load(q).solutions) == 3


def test_truncated_gzip_is_reported(tmp_path):
    blob = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in GOOD * 200))
    p = tmp_path / "in.jsonl.gz"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError, match=r"in\.jsonl\.gz: cannot read the file"):
        load(str(p))


# ------------------------------------------------------------------------------------ field mapping


def test_gsm8k_shaped_rows(tmp_path):
    row = {
        "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many in May. "
        "How many clips did she sell altogether?",
        "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
    }
    p = write_jsonl(tmp_path / "gsm8k.jsonl", [row])
    (sol,) = load_solutions(InputSpec(paths=(p,), **GSM8K)).solutions
    assert sol.answer == "72"
    assert sol.problem.startswith("Natalia sold clips")
    assert len(sol.steps) == 3 and sol.steps[-1] == "#### 72"
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": "no marker"}])
    with pytest.raises(InputError, match=r"bad\.jsonl line 1, field 'answer': no '#### <answer>' marker"):
        load_solutions(InputSpec(paths=(bad,), **GSM8K))


def test_math_shaped_rows(tmp_path):
    hendrycks = {
        "problem": "Compute $\\frac{1}{2}+\\frac{1}{2}$.",
        "level": "Level 1",
        "type": "Algebra",
        "solution": "We add: $\\frac{1}{2}+\\frac{1}{2}=\\frac{2}{2}$.\n\nSo it is $\\boxed{\\frac{2}{2}=1}$.",
    }
    p = write_parquet(tmp_path / "math.parquet", [hendrycks])
    (sol,) = load_solutions(InputSpec(paths=(p,), **MATH)).solutions
    assert sol.answer == "\\frac{2}{2}=1"  # nested braces kept
    assert len(sol.steps) == 2
    # MATH-500 shape (problem, solution, answer) works with the defaults.
    m500 = dict(hendrycks, answer="1")
    (sol2,) = load(write_jsonl(tmp_path / "m500.jsonl", [m500])).solutions
    assert sol2.answer == "1" and sol2.steps == sol.steps


def test_processbench_shaped_rows(tmp_path):
    row = {
        "id": "gsm8k-0",
        "generator": "Qwen2-7B-Instruct",
        "problem": "Sue has 3 apples and buys 2. How many?",
        "steps": ["She has 3 apples.", "3+2=5, so \\boxed{5}."],
        "final_answer_correct": True,
        "label": -1,
    }
    p = tmp_path / "processbench.json"
    p.write_text(json.dumps([row]))  # ProcessBench ships JSON arrays without a gold answer
    with pytest.raises(InputError, match=r"processbench\.json row 0, field 'answer': missing gold answer"):
        load(str(p))
    p.write_text(json.dumps([dict(row, gold="5")]))
    (sol,) = load(str(p), answer_field="gold").solutions
    assert sol.id == "gsm8k-0" and sol.answer == "5" and len(sol.steps) == 2


def test_field_mapping_and_splitters(tmp_path):
    rows = [
        {"uid": 7, "question": "q1", "gold": 1.0, "text": "Step 1: a\nStep 2: b"},
        {"uid": "x-8", "question": "q2", "gold": 2.5, "text": "Step 1: c"},
    ]
    p = write_jsonl(tmp_path / "in.jsonl", rows)
    spec = dict(
        problem_field="question", answer_field="gold", solution_field="text", id_field="uid", splitter="step-prefix"
    )
    sols = load(p, **spec).solutions
    assert [(s.id, s.answer, s.steps) for s in sols] == [("7", "1", ("a", "b")), ("x-8", "2.5", ("c",))]
    sols = load(p, **dict(spec, splitter="regex", split_regex=r"\n")).solutions
    assert sols[0].steps == ("Step 1: a", "Step 2: b")


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "line, field, reason",
    [
        (b'{"problem": "p", "answer": "1", "steps": ["a", "b', None, "not valid JSON"),
        (b'{"problem": "caf\xe9", "answer": "1", "steps": ["a"]}', None, "not UTF-8: invalid byte at offset 16 of the line (0xe9"),
        (b'["p", "1", ["a"]]', None, "the row is a list, expected an object"),
        ({"question": "p", "answer": "1", "steps": ["a"]}, "problem", "missing problem (the row has fields: question"),
        ({"problem": None, "answer": "1", "steps": ["a"]}, "problem", "problem is null"),
        ({"problem": 5, "answer": "1", "steps": ["a"]}, "problem", "expected the problem as text, got int"),
        ({"problem": " ", "answer": "1", "steps": ["a"]}, "problem", "problem is empty"),
        ({"problem": "p", "steps": ["a"]}, "answer", "missing gold answer"),
        ({"problem": "p", "answer": None, "steps": ["a"]}, "answer", "missing gold answer (null)"),
        ({"problem": "p", "answer": ["1"], "steps": ["a"]}, "answer", "got a list"),
        ({"problem": "p", "answer": True, "steps": ["a"]}, "answer", "got a boolean"),
        ({"problem": "p", "answer": "  ", "steps": ["a"]}, "answer", "gold answer is empty"),
        ({"problem": "p", "answer": "1", "steps": "a\n\nb"}, "steps", "got one text; if this field holds"),
        ({"problem": "p", "answer": "1", "steps": {"0": "a"}}, "steps", "got an object"),
        ({"problem": "p", "answer": "1", "steps": []}, "steps", "empty steps list"),
        ({"problem": "p", "answer": "1", "steps": ["a", 3]}, "steps", "step 2 (steps[1]) is int, expected text"),
        ({"problem": "p", "answer": "1", "steps": ["a", None]}, "steps", "step 2 (steps[1]) is null"),
        ({"problem": "p", "answer": "1", "steps": ["a", " \n "]}, "steps", "step 2 (steps[1]) is empty"),
        ({"problem": "p", "answer": "1", "steps": ["a", "x" * 20001]}, "steps", "step 2 has 20001 characters"),
        ({"problem": "p", "answer": "1", "steps": ["a"] * 201}, "steps", "201 steps, over the limit of 200"),
        ({"problem": "p", "answer": "1"}, "steps", "missing steps: need 'steps' (list of strings) or 'solution'"),
        ({"problem": "p", "answer": "1", "steps": None, "solution": None}, "steps", "both 'steps' and 'solution'"),
        ({"problem": "p", "answer": "1", "solution": 12}, "solution", "expected the solution as text, got int"),
        ({"problem": "p", "answer": "1", "solution": "\n\n"}, "solution", "solution is empty"),
        ({"problem": "p", "answer": "1", "solution": "x" * 20001}, "solution", "step 1 has 20001 characters"),
        ({"problem": "p", "answer": "1", "steps": ["a"], "id": 1.5}, "id", "expected the id as text or an integer"),
        ({"problem": "p", "answer": "1", "steps": ["a"], "id": " "}, "id", "id is empty"),
        (b'{"problem": "p\\ud800", "answer": "1", "steps": ["a"]}', "problem", "lone surrogate"),
        ({"problem": "p", "answer": float("nan"), "steps": ["a"]}, "answer", "got float"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path, line, field, reason):
    msg = bad_message(tmp_path, line)
    where = f"{tmp_path}/in.jsonl line 2"
    assert msg.startswith(f"{where}, field '{field}': " if field else f"{where}: "), msg
    assert reason in msg
    assert "Fix the row or pass --skip-bad" in msg


def test_limits_are_configurable(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", [{"problem": "p", "answer": "1", "steps": ["abcdef"] * 3}])
    with pytest.raises(InputError, match="step 1 has 6 characters, over the limit of 5"):
        load(p, max_step_chars=5)
    with pytest.raises(InputError, match="3 steps, over the limit of 2"):
        load(p, max_steps=2)
    assert len(load(p, max_step_chars=6, max_steps=3).solutions) == 1


def test_enormous_line_is_rejected_without_stopping_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(files, "_CHUNK", 256)  # the long line spans several chunks
    p = write_jsonl(tmp_path / "in.jsonl", [GOOD[0], {"problem": "p" * 5000, "answer": "1", "steps": ["s"]}, GOOD[1]])
    with pytest.raises(InputError, match=r"in\.jsonl line 2: line is 50\d\d bytes, over the 1000-byte limit"):
        load(p)
    res = load_solutions(InputSpec(paths=(p,)), skip_bad=True, rejects_path=str(tmp_path / "r.jsonl"))
    assert [s.source for s in res.solutions] == [f"{p}:0", f"{p}:2"]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_line_reader_matches_split_for_any_chunk_size(monkeypatch, chunk):
    import io

    monkeypatch.setattr(files, "_CHUNK", chunk)
    lines = [b"", b"a", b"bb" * 20, b"", b"c" * 9, b"d" * 31, b"e"]
    blob = b"\n".join(lines)
    got = list(files._iter_lines(io.BytesIO(blob), max_bytes=30))
    want = [(x, len(x)) if len(x) <= 30 else (None, len(x)) for x in blob.split(b"\n")]
    assert got == want
    assert list(files._iter_lines(io.BytesIO(blob + b"\n"), max_bytes=30)) == want


def test_blank_lines_and_bom_are_not_rows(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD[0]).encode() + b"\r\n\n   \n" + json.dumps(GOOD[1]).encode())
    res = load(str(p))
    assert [s.source for s in res.solutions] == [f"{p}:0", f"{p}:3"]  # last line without newline is read
    assert res.stats.rows == 2


def test_parquet_with_another_schema(tmp_path):
    p = write_parquet(tmp_path / "other.parquet", [{"question": "q", "response": "r"}] * 3)
    with pytest.raises(InputError) as ei:
        load(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}, field 'problem': Parquet schema has no column 'problem'")
    assert "no column 'answer'" in msg and "(columns: question, response)" in msg and "3 rows" in msg


def test_parquet_wrong_types_and_not_parquet(tmp_path):
    schema = pa.schema([("problem", pa.int64()), ("answer", pa.int64()), ("steps", pa.list_(pa.string()))])
    p = write_parquet(tmp_path / "t.parquet", [{"problem": 1, "answer": 2, "steps": ["s"]}], schema)
    with pytest.raises(InputError, match=r"t\.parquet row 0, field 'problem': expected the problem as text, got int"):
        load(p)
    q = tmp_path / "fake.parquet"
    q.write_bytes(b"this is not parquet at all")
    with pytest.raises(InputError, match=r"fake\.parquet: not a readable Parquet file"):
        load(str(q))


def test_bad_json_array_file(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('[{"problem": "p", "answer": "1", "steps": ["s"]}, {"problem": ')
    with pytest.raises(InputError, match=r"a\.json: not valid JSON \(Expecting value, line 1 column"):
        load(str(p))


def test_error_lists_first_five_and_total(tmp_path):
    rows = [GOOD[0]] + [{"problem": f"p{i}", "steps": ["s"]} for i in range(8)]
    p = write_jsonl(tmp_path / "in.jsonl", rows)
    with pytest.raises(InputError) as ei:
        load(p)
    lines = str(ei.value).splitlines()
    assert [ln.split(",")[0] for ln in lines[:5]] == [f"{p} line {i}" for i in range(2, 7)]
    assert "(8 bad rows in all, first 5 shown)" in lines[5]
    assert len(ei.value.rejects) == 5


def test_duplicate_id_with_other_content_names_both_rows(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [dict(GOOD[2])])
    b = write_jsonl(tmp_path / "b.jsonl", [GOOD[0], dict(GOOD[2], answer="7")])
    with pytest.raises(InputError) as ei:
        load([a, b])
    assert str(ei.value).startswith(
        f"{b} line 2, field 'id': id 'q3' is already used by {a} line 1 for different content"
    )


def test_exact_duplicates_keep_first_and_are_counted(tmp_path, caplog):
    p = write_jsonl(tmp_path / "in.jsonl", [GOOD[0], GOOD[1], GOOD[0], GOOD[0]])
    with caplog.at_level(logging.WARNING, logger="pipeline.input.reading"):
        res = load(p)
    assert [s.source for s in res.solutions] == [f"{p}:0", f"{p}:1"]
    assert res.n_duplicates == 2 and res.n_rejected == 0
    assert "skipped 2 exact duplicate row(s)" in caplog.text and f"{p} line 3 duplicates {p} line 1" in caplog.text


def test_skip_bad_writes_rejects_and_keeps_good_rows(tmp_path):
    good_pq = write_parquet(tmp_path / "a.parquet", [{"problem": "pq", "answer": "1", "steps": ["s"]}])
    bad_pq = write_parquet(tmp_path / "b.parquet", [{"question": "q"}])
    rows = [GOOD[0], '{"problem": "x", "answer": "1", "st', {"problem": "p", "answer": "1", "steps": []}, GOOD[1]]
    j = write_jsonl(tmp_path / "c.jsonl", rows)
    out = tmp_path / "out" / "rejects.jsonl"
    res = load_solutions(InputSpec(paths=(str(tmp_path),)), skip_bad=True, rejects_path=str(out))
    assert [s.problem for s in res.solutions] == ["pq", GOOD[0]["problem"], GOOD[1]["problem"]]
    assert res.n_rejected == 3
    rejects = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["file"], r["row"], r["field"]) for r in rejects] == [
        (bad_pq, None, "problem"),
        (j, 1, None),
        (j, 2, "steps"),
    ]
    assert "no column 'problem'" in rejects[0]["reason"]
    assert "not valid JSON" in rejects[1]["reason"] and rejects[1]["raw"] == rows[1]
    assert rejects[2]["reason"] == "empty steps list" and rejects[2]["where"] == f"{j} line 3"
    assert [x.name for x in out.parent.iterdir()] == ["rejects.jsonl"]  # no temp file left
    assert good_pq in res.files


def test_skip_bad_needs_a_place_for_rejects(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", GOOD)
    with pytest.raises(ValueError, match="on_reject"):
        iter_solutions(InputSpec(paths=(p,)), skip_bad=True)


def test_rejects_writer_discards_on_error(tmp_path):
    out = tmp_path / "r.jsonl"
    with pytest.raises(RuntimeError), RejectsWriter(str(out)) as w:
        w(ingest.Reject("f", 1, "answer", "why"))
        raise RuntimeError("boom")
    assert not out.exists() and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------ streaming


def test_one_pass_names_bad_rows_at_its_end(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", GOOD * 3 + [{"problem": "late bad row"}] * 2 + [GOOD[1]])
    decoded = []
    it = iter_solutions(InputSpec(paths=(p,)), stats=IngestStats())
    with pytest.raises(InputError, match=r"line 10, field 'answer'") as ei:
        for sol in it:  # the valid rows come first; the error once every row was read
            decoded.append(sol)
    assert len(decoded) == 3 and "(2 bad rows in all" not in str(ei.value) and len(ei.value.rejects) == 2
    got = []
    stats = ingest.IngestStats()
    sols = list(iter_solutions(InputSpec(paths=(p,)), skip_bad=True, on_reject=got.append, stats=stats))
    assert len(sols) == 3 and stats.duplicates == 7 and [r.row for r in got] == [9, 10]


def test_iter_rows_exposes_decode_errors(tmp_path):
    p = write_jsonl(tmp_path / "in.jsonl", [GOOD[0], "{oops"])
    rows = list(iter_rows(InputSpec(paths=(p,))))
    assert rows[0].data == GOOD[0] and rows[0].error is None
    assert rows[1].data is None and "not valid JSON" in rows[1].error and rows[1].where == f"{p} line 2"


def test_streams_a_large_file(tmp_path, monkeypatch):
    """The input is read lazily: the first solutions come out after a bounded number of rows was decoded,
    not after the whole file (speed is measured in bench/bench_speed.py, not asserted here)."""

    n = 200_000
    p = tmp_path / "big.jsonl"
    with open(p, "w") as f:
        for i in range(n):
            f.write(json.dumps({"problem": f"What is {i}+1?", "answer": i + 1, "solution": f"{i}+1={i + 1}.\n\nSo {i + 1}."}))
            f.write("\n")
    decoded = [0]
    real = files._read_jsonl

    def counting(*a, **kw):
        for row in real(*a, **kw):
            decoded[0] += 1
            yield row

    monkeypatch.setattr(files, "_read_jsonl", counting)
    spec = InputSpec(paths=(str(p),))
    first = list(itertools.islice(iter_solutions(spec, skip_bad=True, on_reject=pytest.fail), 3))
    assert [s.answer for s in first] == ["1", "2", "3"]
    assert decoded[0] < n // 10, f"{decoded[0]} rows decoded to yield the first 3: not read lazily"
    count, last = 0, None
    for sol in iter_solutions(spec, skip_bad=True, on_reject=pytest.fail):
        count, last = count + 1, sol
    assert count == n and isinstance(last, Solution) and last.source == f"{p}:{n - 1}"


# ------------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(splitter="lines"), "unknown splitter 'lines'"),
        (dict(splitter="regex"), "needs a split regex"),
        (dict(splitter="regex", split_regex="("), "invalid split regex"),
        (dict(format="csv"), "unknown input format 'csv'"),
        (dict(answer_extract="last"), "unknown answer_extract"),
        (dict(max_steps=0), "max_steps must be a positive integer"),
    ],
)
def test_bad_spec(kw, msg):
    with pytest.raises(InputError, match=msg):
        InputSpec(paths=("x.jsonl",), **kw)


def test_resolve_errors_name_the_path(tmp_path):
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file or folder"):
        resolve_files(InputSpec(paths=(str(tmp_path / "nope.jsonl"),)))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: matched no input files"):
        resolve_files(InputSpec(paths=(str(tmp_path / "empty"),)))
    with pytest.raises(InputError, match=r"\*\.parquet: matched no input files"):
        resolve_files(InputSpec(paths=(str(tmp_path / "*.parquet"),)))
    (tmp_path / "data.txt").write_text(json.dumps(GOOD[0]) + "\n")
    with pytest.raises(InputError, match=r"data\.txt: cannot tell the format"):
        resolve_files(InputSpec(paths=(str(tmp_path / "data.txt"),)))
    assert len(load(str(tmp_path / "data.txt"), format="jsonl").solutions) == 1


def test_light_imports():
    import subprocess
    import sys

    code = (
        "import sys, pipeline.input, pipeline.input.split; "
        "bad = [m for m in ('torch', 'transformers', 'vllm', 'ray') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------ gold answers


class _Golds:
    """A scripted batch gold check: golds starting with "BAD" cannot be read."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, golds):
        self.calls.append(list(golds))
        return [f"cannot parse {g!r}" if g.startswith("BAD") else None for g in golds]


def test_unreadable_gold_names_file_row_and_field(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "BATCH_ROWS", 2)
    rows = [GOOD[0], {"problem": "q", "answer": "BAD{", "steps": ["s"]}, GOOD[1], GOOD[2],
            {"problem": "r", "gold": "BAD}", "steps": ["t"]}]
    p = write_jsonl(tmp_path / "problems.jsonl", rows)
    check = _Golds()
    with pytest.raises(InputError) as ei:
        load(p, gold_check=check)
    assert f"{p} line 2, field 'answer': gold answer cannot be read by the grader: cannot parse 'BAD{{'" in str(ei.value)
    # golds are checked in batches (here of 2 valid rows), not one by one
    assert check.calls == [["2", "BAD{"], ["6", "6"]]

    check = _Golds()
    res = load_solutions(InputSpec(paths=(p,), answer_field="gold", gold_check=check), skip_bad=True,
                         rejects_path=str(tmp_path / "rejects.jsonl"))
    assert [s.problem for s in res.solutions] == []  # only row 5 has a "gold" field, and it is unreadable
    rej = [json.loads(x) for x in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert rej[-1]["field"] == "gold" and rej[-1]["row"] == 4 and "cannot be read by the grader" in rej[-1]["reason"]


def test_skip_bad_rejects_unreadable_gold_and_keeps_order(tmp_path):
    rows = [GOOD[0], {"problem": "q", "answer": "BAD{", "steps": ["s"]}, GOOD[1], GOOD[2]]
    p = write_jsonl(tmp_path / "problems.jsonl", rows)
    out = tmp_path / "rejects.jsonl"
    res = load_solutions(InputSpec(paths=(p,), gold_check=_Golds()), skip_bad=True, rejects_path=str(out))
    assert [s.problem for s in res.solutions] == [GOOD[0]["problem"], GOOD[1]["problem"], GOOD[2]["problem"]]
    assert res.n_rejected == 1 and res.stats.solutions == 3
    (r,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (r["file"], r["row"], r["field"], r["where"]) == (p, 1, "answer", f"{p} line 2")
    assert r["reason"] == "gold answer cannot be read by the grader: cannot parse 'BAD{'"
    got: list = []
    sols = list(iter_solutions(InputSpec(paths=(p,), gold_check=_Golds()), skip_bad=True, on_reject=got.append))
    assert len(sols) == 3 and [x.row for x in got] == [1]


def test_rejected_gold_does_not_take_its_id(tmp_path):
    rows = [{"id": "a", "problem": "q", "answer": "BAD", "steps": ["s"]},
            {"id": "a", "problem": "q", "answer": "3", "steps": ["s"]}]
    p = write_jsonl(tmp_path / "in.jsonl", rows)
    res = load_solutions(InputSpec(paths=(p,), gold_check=_Golds()), skip_bad=True,
                         rejects_path=str(tmp_path / "r.jsonl"))
    assert [s.answer for s in res.solutions] == ["3"] and res.n_rejected == 1


def test_label_checks_golds_with_the_default_grader_only(tmp_path):
    from pipeline.config import LabelConfig
    from pipeline.run.plan import gold_check, input_spec

    check = gold_check("sympy", 2.0)
    assert check is gold_check("sympy", 2.0)  # one memo for all passes over the input
    assert check(["12", r"\frac{7}{3}", r"\frac{1}{", "12"])[:2] == [None, None]
    assert check([r"\frac{1}{"])[0] is not None
    assert gold_check("exact", 2.0) is None
    assert input_spec(LabelConfig(input=["x.jsonl"], grader="exact")).gold_check is None
    assert input_spec(LabelConfig(input=["x.jsonl"])).gold_check is check

    p = write_jsonl(tmp_path / "problems.jsonl", [GOOD[0], {"problem": "q", "answer": r"\frac{1}{", "steps": ["s"]}])
    with pytest.raises(InputError, match=r"problems\.jsonl line 2, field 'answer': gold answer cannot be read by the "
                                         r"grader: "):
        load(p, gold_check=check)


def test_gold_check_memo():
    calls = []

    def check(golds):
        calls.append(list(golds))
        return [None if g != "x" else "no" for g in golds]

    memo = ingest.GoldCheck(check, max_cached=3)
    assert memo(["1", "x", "1"]) == [None, "no", None] and calls == [["1", "x"]]
    assert memo(["x", "1"]) == ["no", None] and len(calls) == 1
    assert memo(["2", "3"]) == [None, None] and calls[-1] == ["2", "3"]  # memo full: cleared, still right
    assert memo(["x"]) == ["no"]
