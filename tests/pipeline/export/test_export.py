"""Trainer exports: round trips for every format, the self-checks, label rules, cutting and balancing."""

from __future__ import annotations

import pytest

from pipeline.export import export_corpus
from pipeline.export.common import FORMATS, ExportError, ExportOptions
from tests.export_files import check_row, format_row, load_export, parse_record
from tests.pipeline.prm_fixtures import ROWS, char_tokenizer, make_corpus

PROBLEMS = {sid: f"Problem {sid}: compute it." for sid, *_ in ROWS}
CORPUS = {sid: (steps, labels) for sid, steps, labels, *_ in ROWS}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus") / "out"
    make_corpus(out)
    return str(out)


@pytest.fixture(scope="module")
def tok():
    return char_tokenizer()


def settled(labels):
    """The labels with every hole the row itself settles made True: a null before a later True (that step's
    prefix, which holds this one, reached the answer) or before the first False (the row's first error)."""
    fe = next((i for i, y in enumerate(labels) if y is False), len(labels))
    return [True if y is None and (i < fe or True in labels[i + 1:]) else y for i, y in enumerate(labels)]


def expected_hard(sid, drop_after_first_error=True):
    """The corpus's steps and hard labels, its settled holes filled, cut before the first null label left and
    after the first False."""
    steps, labels = CORPUS[sid]
    labels = settled(labels)
    end = next((i for i, y in enumerate(labels) if y is None), len(labels))
    if drop_after_first_error:
        fe = next((i for i, y in enumerate(labels[:end]) if y is False), -1)
        if fe != -1:
            end = fe + 1
    return steps[:end], labels[:end]


@pytest.mark.parametrize("file_format", ["parquet", "jsonl"])
@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "processbench"])
def test_round_trip_hard(corpus, tok, tmp_path, fmt, file_format):
    res = export_corpus(corpus, fmt, str(tmp_path / "exp"), tokenizer=tok, file_format=file_format, shard_rows=4)
    assert res.tokenizer_checked and len(res.files) == 2  # 6 rows, 4 per shard
    assert all(f.endswith(f".{file_format}") for f in res.files)
    records = load_export(str(tmp_path / "exp"))
    assert [r["id"] for r in records] == [sid for sid, *_ in ROWS]  # every row here has a labeled first step
    opts = ExportOptions(fmt)
    for rec in records:
        steps, labels = parse_record(rec, PROBLEMS[rec["id"]], opts)
        assert (steps, labels) == expected_hard(rec["id"]), rec["id"]
        assert all(type(y) is bool for y in labels) or fmt == "openrlhf"
    assert res.steps == sum(len(expected_hard(sid)[0]) for sid in CORPUS)
    assert res.positives + res.negatives == res.steps


@pytest.mark.parametrize("file_format", ["parquet", "jsonl"])
def test_processbench_round_trip_is_a_valid_eval_reference(corpus, tmp_path, file_format):
    from pipeline.commands.evaluate import evaluate

    res = export_corpus(corpus, "processbench", str(tmp_path / "pb"), file_format=file_format)
    recs = {r["id"]: r for r in load_export(str(tmp_path / "pb"))}
    # s6's null label comes before a step that reached the answer: the row has no error, it is not undecided
    assert res.skipped == {} and res.filled == 1
    for sid, (steps, labels) in CORPUS.items():
        assert recs[sid]["steps"] == steps
        assert recs[sid]["label"] == next((i for i, y in enumerate(labels) if y is False), -1)
    # the export read as a ProcessBench reference agrees with the corpus it came from
    m = evaluate(corpus, res.files[0])
    assert m["f1"] == 1.0 and m["solutions"] == 6


def test_datasets_load_dataset_reads_exports(corpus, tok, tmp_path):
    datasets = pytest.importorskip("datasets")
    for fmt, ff in [("trl", "parquet"), ("openrlhf", "jsonl"), ("qwen-prm", "parquet")]:
        out = tmp_path / fmt
        export_corpus(corpus, fmt, str(out), tokenizer=tok, file_format=ff, shard_rows=2,
                      label_rule="soft" if fmt == "qwen-prm" else "hard")
        ds = datasets.load_dataset(str(out), split="train")
        assert len(ds) == len(ROWS)
        rows = {r["id"]: r for r in ds}
        if fmt == "trl":
            assert rows["s2"]["completions"] == ["2 * 3 = 6", "6 + 1 = 8"] and rows["s2"]["labels"] == [True, False]
        elif fmt == "openrlhf":
            assert rows["s2"]["value"] == ["+", "-"]
        else:
            assert rows["s1"]["labels"] == pytest.approx([1.0, 0.75, 1.0])


def test_soft_labels_stay_floats(corpus, tok, tmp_path):
    for fmt, key in [("openrlhf", "value"), ("qwen-prm", "labels")]:
        for ff in ("parquet", "jsonl"):
            out = tmp_path / f"{fmt}-{ff}"
            res = export_corpus(corpus, fmt, str(out), label_rule="soft", tokenizer=tok, file_format=ff)
            recs = {r["id"]: r for r in load_export(str(out))}
            assert res.soft and res.imputed == 2  # s4 step 0 and s5 step 0 have no MC estimate
            assert recs["s1"][key] == pytest.approx([1.0, 0.75, 1.0])
            assert recs["s2"][key] == pytest.approx([0.5, 0.0])
            assert all(type(v) is float for r in recs.values() for v in r[key])


def test_soft_refused_where_the_trainer_would_cast(corpus, tmp_path):
    with pytest.raises(ExportError, match=r"int\(\)"):
        export_corpus(corpus, "trl", str(tmp_path / "x"), label_rule="soft")
    for fmt in ("math-shepherd", "processbench"):
        with pytest.raises(ExportError, match="soft"):
            export_corpus(corpus, fmt, str(tmp_path / "x"), label_rule="soft")


def test_threshold_rule(corpus, tmp_path):
    export_corpus(corpus, "trl", str(tmp_path / "t"), label_rule="threshold", threshold=0.6,
                  drop_after_first_error=False)
    recs = {r["id"]: r for r in load_export(str(tmp_path / "t"))}
    assert recs["s1"]["labels"] == [True, True, True]  # 1.0, 0.75, 1.0
    assert recs["s2"]["labels"] == [False, False, False, False]  # 0.5 < 0.6
    assert recs["s5"]["labels"] == [True, True]  # no MC value for step 0: keeps its hard label


def test_drop_after_first_error_option(corpus, tmp_path):
    res = export_corpus(corpus, "trl", str(tmp_path / "keep"), drop_after_first_error=False)
    recs = {r["id"]: r for r in load_export(str(tmp_path / "keep"))}
    for sid in CORPUS:
        assert (recs[sid]["completions"], recs[sid]["labels"]) == expected_hard(sid, drop_after_first_error=False)
    assert recs["s2"]["labels"] == [True, False, False, False]
    assert "after_first_error" not in res.cut
    res2 = export_corpus(corpus, "trl", str(tmp_path / "drop"))
    assert res2.cut["after_first_error"] == 2 and load_export(str(tmp_path / "drop"))[1]["labels"] == [True, False]


def test_balance_downsample(corpus, tmp_path):
    res = export_corpus(corpus, "trl", str(tmp_path / "b"), balance="downsample")
    recs = load_export(str(tmp_path / "b"))
    with_error = [r for r in recs if False in r["labels"]]
    assert len(with_error) == 3 and len(recs) == 6  # s2, s3, s4 have errors; s1, s5, s6 don't: balanced already
    tight = export_corpus(corpus, "trl", str(tmp_path / "b2"), balance="downsample", label_rule="threshold",
                          threshold=0.9)
    recs2 = load_export(str(tmp_path / "b2"))
    n_err = sum(1 for r in recs2 if False in r["labels"])
    assert n_err == len(recs2) - n_err and tight.skipped.get("balance", 0) > 0
    again = export_corpus(corpus, "trl", str(tmp_path / "b3"), balance="downsample", label_rule="threshold",
                          threshold=0.9)
    assert [r["id"] for r in load_export(str(tmp_path / "b3"))] == [r["id"] for r in recs2]  # deterministic
    assert res.rows == 6 and again.rows == tight.rows


def test_bad_placeholder_fails_naming_the_row(corpus, tok, tmp_path):
    # "<step>" is not in the vocabulary: it splits into 6 character tokens
    with pytest.raises(ExportError, match=r"row 's1'.*'<step>' encodes to 6 tokens"):
        export_corpus(corpus, "openrlhf", str(tmp_path / "bad"), placeholder="<step>", tokenizer=tok)
    with pytest.raises(ExportError, match=r"row 's1'.*encodes to 2 tokens"):
        export_corpus(corpus, "math-shepherd", str(tmp_path / "bad"), tokenizer=char_tokenizer(extra_special=()))
    assert not (tmp_path / "bad").exists()  # nothing written
    # without a tokenizer only text checks run, and the result says so
    res = export_corpus(corpus, "openrlhf", str(tmp_path / "ok"), placeholder="<step>")
    assert not res.tokenizer_checked and any("tokenizer" in n for n in res.notes)


def test_tag_inside_a_step_or_merging_is_caught(tok):
    opts = ExportOptions("math-shepherd")
    from pipeline.export.common import Row

    row = Row("r7", "P", ["a ки b", "c"], [True, False])
    with pytest.raises(ExportError, match=r"row 'r7'.*step 1 contains the step tag"):
        check_row(format_row(row, opts, tok), row, opts, tok)
    # a tag that is one token alone but merges with its neighbours in context
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "a": 1, " ": 2, "#": 3, " #": 4, "\n": 5, "P": 6, "+": 7, "-": 8}
    merging = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[(" ", "#")],
                                                                            unk_token="<unk>")))
    o2 = ExportOptions("openrlhf", step_tag="#")
    row2 = Row("r8", "P", ["a", "a"], [True, True])
    with pytest.raises(ExportError, match=r"row 'r8'.*occurs 0 times in the encoded row, expected 2"):
        check_row(format_row(row2, o2), row2, o2, merging)


def test_label_count_mismatch_is_an_error(tok):
    from pipeline.export.common import Row

    opts = ExportOptions("trl")
    row = Row("r9", "P", ["a", "b"], [True, True])
    rec = format_row(row, opts)
    rec["labels"] = [True]
    with pytest.raises(ExportError, match=r"row 'r9'.*labels read back"):
        check_row(rec, row, opts, tok)
    with pytest.raises(ExportError, match=r"row 'r9'.*1 labels for 2 steps"):
        check_row(rec, Row("r9", "P", ["a", "b"], [True]), opts, tok)
    # a tokenizer without an unknown token drops characters it does not know: the separator vanishes
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"a": 0, "b": 1, "P": 2, "\n": 3}
    dropping = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[])))
    o2 = ExportOptions("trl", step_tag="\t")
    with pytest.raises(ExportError, match=r"row 'r9'.*separator '\\t' encodes to no tokens"):
        check_row(format_row(row, o2), row, o2, dropping)


def test_output_not_overwritten_by_default(corpus, tmp_path):
    export_corpus(corpus, "trl", str(tmp_path / "o"), shard_rows=1)
    with pytest.raises(ExportError, match="--overwrite"):
        export_corpus(corpus, "trl", str(tmp_path / "o"))
    res = export_corpus(corpus, "trl", str(tmp_path / "o"), overwrite=True)
    assert len(res.files) == 1 and len(load_export(str(tmp_path / "o"))) == 6  # stale shards removed
    # genprm writes through the same output (pipeline.export.common.ExportOutput)
    with pytest.raises(ExportError, match="--overwrite"):
        export_corpus(corpus, "genprm", str(tmp_path / "o"))
    res = export_corpus(corpus, "genprm", str(tmp_path / "o"), overwrite=True, shard_rows=4)
    assert len(res.files) == 2 and sorted(p.name for p in (tmp_path / "o").iterdir() if p.name.startswith("part-")) \
        == ["part-00000.parquet", "part-00001.parquet"]
    assert {"prompt", "completion", "label"} <= set(load_export(str(tmp_path / "o"))[0])
    assert not list(tmp_path.glob("o.mcprm-staging-*"))  # the staging folder is gone
    # its target is a first-error index: soft labels are refused as for processbench, naming the formats that
    # take them (before, genprm wrote every row as error-free: a float label is never False)
    with pytest.raises(ExportError, match="soft cannot be exported as genprm: its target is the index"):
        export_corpus(corpus, "genprm", str(tmp_path / "s"), label_rule="soft")
    assert not (tmp_path / "s").exists()


def test_cli_export(corpus, tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["export", corpus, "--format", "math-shepherd", "--output", str(out),
                                 "--file-format", "jsonl"])
    assert r.exit_code == 0, r.output
    assert "only text checks" in r.output and len(load_export(str(out))) == 6
    r = CliRunner().invoke(app, ["export", corpus, "--format", "trl", "--output", str(tmp_path / "x"),
                                 "--label-rule", "soft"])
    assert r.exit_code == 1 and "int()" in r.output


def test_export_label_rules_from_counts_and_confidence(corpus, tmp_path):
    """Issue 16: --label-rule changepoint, --min-confidence, --weight-by-confidence."""
    # s3: 0 of 4 at step 0, step 1 unsampled, own answer wrong. Changepoint: L(e=0) = 0.98^4 = 0.92237,
    # L(e=1) = L(e=2) = P(0 of 4 | alive ~ Beta(.5,.5)) = 0.27344  ->  first error 0, confidence 0.62780
    res = export_corpus(corpus, "processbench", str(tmp_path / "pb"), label_rule="changepoint",
                        weight_by_confidence=True)
    rows = {r["id"]: r for r in load_export(str(tmp_path / "pb"))}
    assert rows["s3"]["label"] == 0 and rows["s3"]["weight"] == pytest.approx(0.92237 / (0.92237 + 2 * 0.27344),
                                                                              abs=1e-4)
    assert rows["s5"]["label"] == -1 and res.rows + sum(res.skipped.values()) == res.corpus_rows
    # hard labels keep the rows whose stored confidence reaches the bar; the trust-correct row (right answer,
    # no rollouts) is right with the model's 1 - rho
    from pipeline.corpus import read_corpus

    stored = {r["id"]: r["first_error_confidence"] for r in read_corpus(corpus).to_pylist()}
    rho = read_corpus(corpus, columns=["id"]) and __import__("json").load(open(f"{corpus}/manifest.json"))[
        "first_error_model"]["rho"]
    assert stored["s5"] == pytest.approx(1 - rho, abs=1e-6)
    res = export_corpus(corpus, "trl", str(tmp_path / "trl"), min_confidence=0.85, weight_by_confidence=True)
    got = load_export(str(tmp_path / "trl"))
    want = [sid for sid, c in stored.items() if c is not None and c >= 0.85]
    assert "s5" in want and len(want) < len(stored) and [r["id"] for r in got] == want
    assert got[[r["id"] for r in got].index("s5")]["weight"] == pytest.approx(1 - rho, abs=1e-6)
    assert res.skipped["low_confidence"] == len(stored) - len(want)
    with pytest.raises(ExportError, match="min-confidence"):
        export_corpus(corpus, "trl", str(tmp_path / "bad"), min_confidence=2.0)


def test_batch_encoding_gives_the_tokenizers_own_ids():
    """Issue 17: the Rust backend's encode_batch_fast is used only where it gives the wrapper's ids; a backend
    with truncation on, or a tokenizer without a Rust backend, is encoded by the wrapper itself."""
    from pipeline.export.tokens import Encoded

    texts = ["3 + 4 = 7 <extra_0>", "ки\nx ки", "", "The answer is \\boxed{5}.<extra_0>" * 3]
    tok = char_tokenizer()
    want = [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    enc = Encoded(tok, texts)
    assert enc._backend is not None
    assert [enc(t)["input_ids"] for t in texts] == want

    short = char_tokenizer()
    short._tokenizer.enable_truncation(5)
    enc = Encoded(short, texts)
    assert enc._backend is None
    assert [enc(t)["input_ids"] for t in texts] == [list(x) for x in short(texts, add_special_tokens=False)[
        "input_ids"]]

    class Plain:  # no Rust backend: called as it is
        def __call__(self, text, add_special_tokens=False):
            ids = [[len(w) for w in t.split()] for t in text] if isinstance(text, list) else [len(w) for w in
                                                                                                text.split()]
            return {"input_ids": ids}

    enc = Encoded(Plain(), texts)
    assert enc._backend is None and [enc(t)["input_ids"] for t in texts] == [[len(w) for w in t.split()]
                                                                              for t in texts]


def test_atomic_tag_is_counted_in_the_text_with_the_same_result(corpus, tmp_path, monkeypatch):
    """An added, unnormalized tag encodes to its id once per occurrence, so the export counts it in the text
    (no per-row encoding); the files are byte for byte those of the export that encodes every row."""
    import pathlib

    from pipeline.export import tokens as ex

    tok = char_tokenizer()
    enc = ex.Encoded(tok)
    assert enc.atomic_tag("<extra_0>") and enc.atomic_tag("ки")
    assert not enc.atomic_tag("not a token")
    fast = export_corpus(corpus, "qwen-prm", str(tmp_path / "fast"), tokenizer=tok)
    monkeypatch.setattr(ex.Encoded, "atomic_tag", lambda self, tag: False)
    slow = export_corpus(corpus, "qwen-prm", str(tmp_path / "slow"), tokenizer=tok)
    assert fast.rows == slow.rows > 0

    def files(d):
        return {p.name: p.read_bytes() for p in sorted(pathlib.Path(d).glob("part-*"))}

    assert files(tmp_path / "fast") == files(tmp_path / "slow")


def test_tag_the_tokenizer_does_not_keep_whole_turns_the_shortcut_off():
    """A tag the tokenizer matches only as a whole word (single_word) is not atomic; and if a tokenizer ever
    encodes a text's tags to another count than the text shows, the shortcut is off from then on."""
    from tokenizers import AddedToken

    from pipeline.export.tokens import Encoded

    tok = char_tokenizer(extra_special=())
    tok.add_tokens([AddedToken("<sep>", single_word=True)])
    assert not Encoded(tok).atomic_tag("<sep>")

    enc = Encoded(char_tokenizer())
    tid = enc("<extra_0>")["input_ids"][0]
    enc._atomic = {"<extra_0>": True}
    enc.prepare(["a<extra_0>b"])
    assert enc.tag_count("a<extra_0>b", "<extra_0>", tid) == 1  # prepared: encoded and compared
    enc._atomic["<extra_0>"] = True
    enc._ids = {"x<extra_0>": [tid + 1]}  # pretend the tokenizer split the tag
    assert enc.tag_count("x<extra_0>", "<extra_0>", tid) == 0 and enc._atomic["<extra_0>"] is False


HOLE_ROWS = [  # a null label between steps that reached the answer, the first error after it (binary search)
    ("h1", ["a = 1", "b = 2", "c = 3", "d = 4", "e = 6", "The answer is 6"], [True, True, None, True, False, None],
     [(2, 4), (1, 4), (0, 0), (1, 4), (0, 4), None], False, "binary-search"),
    # a null label right before the first error, no step after it reached the answer
    ("h2", ["x = 1", "y = 2", "z = 9", "The answer is 9"], [True, None, False, None],
     [(3, 4), (0, 0), (0, 4), None], False, "binary-search"),
]


@pytest.mark.parametrize("fmt", [*FORMATS, "genprm"])
def test_a_row_with_a_hole_keeps_its_first_error_in_every_format(tmp_path, tok, fmt):
    from tests.pipeline.prm_fixtures import make_corpus

    out = tmp_path / "c"
    make_corpus(out, rows=HOLE_ROWS)
    res = export_corpus(str(out), fmt, str(tmp_path / "e"), tokenizer=tok if fmt != "genprm" else None)
    recs = {r["id"]: r for r in load_export(str(tmp_path / "e"))}
    assert sorted(recs) == ["h1", "h2"] and not res.skipped and res.filled == 2
    for sid, want in (("h1", 4), ("h2", 2)):
        rec = recs[sid]
        if fmt == "genprm":
            got = rec["label"]
        else:
            problem = f"Problem {sid}: compute it."
            _, labels = parse_record(rec, problem, ExportOptions(fmt))
            got = next(i for i, y in enumerate(labels) if y is False or y == "-")
        assert got == want, (fmt, sid, rec)
