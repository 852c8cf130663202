"""Streamed readers and commands give exactly what the in-memory computation (before issue 17) gave."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest

from pipeline.corpus import corpus_stats, iter_corpus, read_corpus, scan_corpus
from pipeline.export import export_corpus
from pipeline.export.common import ExportOptions, Row, fill_holes
from pipeline.export.rows import cut_row, row_labels
from pipeline.storage.schema import SCHEMA_VERSION, arrow_schema
from pipeline.storage.store import CorpusStore
from tests.export_files import check_row, format_row, load_export


# the in-memory downsampling (before issue 17): what the export's two-pass mask must choose
def _balance(rows: list[Row], seed: int, skipped: dict[str, int]) -> list[Row]:
    def rank(r: Row) -> str:
        return hashlib.sha256(f"{seed}:{r.id}:{r.problem}:{len(r.steps)}".encode()).hexdigest()

    neg = [r for r in rows if r.has_error]
    pos = [r for r in rows if not r.has_error]
    if not pos or not neg:
        return rows
    small, big = (pos, neg) if len(pos) <= len(neg) else (neg, pos)
    keep = {id(r) for r in sorted(big, key=rank)[:len(small)]} | {id(r) for r in small}
    skipped["balance"] = len(rows) - len(keep)
    return [r for r in rows if id(r) in keep]

def _random_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        m = rng.randint(1, 7)
        steps = [f"step {j} of {i}: {rng.randint(0, 99)} + {rng.randint(0, 99)}" for j in range(m)]
        labels, mc = [], []
        for _ in range(m):
            kind = rng.random()
            if kind < 0.1:
                labels.append(None)
                mc.append(None)
            elif kind < 0.2:  # labeled without an estimate (trust_correct)
                labels.append(True)
                mc.append(None)
            else:
                v = rng.choice([0.0, 0.125, 0.25, 0.5, 0.75, 1.0])
                labels.append(v > 0)
                mc.append(v)
        fe = next((j for j, y in enumerate(labels) if y is False), -1)
        total = [rng.choice([0, 8]) for _ in range(m)]
        lows = [None if v is None else max(0.0, v - 0.2) for v in mc]
        highs = [None if v is None else min(1.0, v + 0.2) for v in mc]
        conf = None if not sum(total) else rng.random()
        rows.append({
            "id": f"r{i}", "key": f"k{i}", "problem": f"Problem {i % 37}", "answer": str(i % 5), "steps": steps,
            "prompt": f"Problem {i % 37}", "completions": steps, "labels": labels,
            "mc_correct": [int((v or 0) * 8) for v in mc], "mc_total": total, "mc_ungradable": [0] * m,
            "mc_no_answer": [rng.randint(0, 2) for _ in range(m)], "mc_value": mc, "first_error": fe,
            "mc_low": lows, "mc_high": highs, "first_error_confidence": conf,
            "solution_correct": rng.choice([True, False, None]), "rollouts": sum(total),
            "rollout_tokens": sum(total) * rng.randint(10, 40),
            "strategy": rng.choice(["per-step", "binary-search"]), "k": 8, "source": None,
        })
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import pyarrow as pa

    path = tmp_path_factory.mktemp("stream") / "out"
    store = CorpusStore(str(path))
    rows = _random_rows(503)
    shards = []
    for s, (a, b) in enumerate([(0, 200), (200, 201), (201, 503)]):  # uneven shards, one of a single row
        rel = f"data/v00001/part-{s:05d}.parquet"
        d = store.write_table(rel, pa.Table.from_pylist(rows[a:b], schema=arrow_schema()))
        shards.append({"path": rel, "rows": b - a, **d})
    store.commit({"version": 1, "strategy": "per-step", "k": 8, "shards": shards, "schema_version": SCHEMA_VERSION})
    return str(path)


def _stats_in_memory(url: str) -> dict:
    """``corpus_stats`` as it was computed before streaming (the whole corpus as Python lists)."""
    t = read_corpus(url)
    labels = t.column("labels").to_pylist()
    fe = t.column("first_error").to_pylist()
    sc = t.column("solution_correct").to_pylist()
    pos = sum(1 for ls in labels for x in ls if x is True)
    neg = sum(1 for ls in labels for x in ls if x is False)
    n = t.num_rows
    rollouts = int(sum(t.column("rollouts").to_pylist()))
    no_answer = sum(x for xs in t.column("mc_no_answer").to_pylist() for x in xs if x)
    probed = dead = dead_sols = 0
    for ok, cs, ts in zip(sc, t.column("mc_correct").to_pylist(), t.column("mc_total").to_pylist()):
        if ok is True:
            here = [c == 0 for c, n_ in zip(cs, ts) if n_ > 0]
            probed, dead, dead_sols = probed + len(here), dead + sum(here), dead_sols + any(here)
    return {
        "solutions": n, "steps": sum(len(ls) for ls in labels),
        "labels": {"positive": pos, "negative": neg, "unlabeled": sum(1 for ls in labels for x in ls if x is None)},
        "positive_rate": pos / (pos + neg) if pos + neg else None,
        "solutions_with_error": sum(1 for f in fe if f != -1),
        "first_error_histogram": dict(sorted(Counter(f for f in fe if f != -1).items())),
        "solution_correct_rate": (sum(1 for c in sc if c) / n) if n else None,
        "right_answer_wrong_process": sum(1 for c, f in zip(sc, fe) if c is True and f != -1),
        "rollouts": rollouts, "no_answer": no_answer, "no_answer_rate": no_answer / rollouts if rollouts else None,
        "rollout_tokens": int(sum(t.column("rollout_tokens").to_pylist())),
        "rollouts_per_solution": (sum(t.column("rollouts").to_pylist()) / n) if n else None,
        "dead_right_prefixes": {"probed": probed, "dead": dead, "solutions": dead_sols, "rate": dead / probed},
    }


@pytest.mark.parametrize("batch_rows", [1, 7, 65_536])
def test_streamed_stats_equal_in_memory(corpus, batch_rows):
    got = corpus_stats(corpus, batch_rows=batch_rows)
    want = _stats_in_memory(corpus)
    assert {k: got[k] for k in want} == want
    assert all(type(k) is int for k in got["first_error_histogram"])
    assert corpus_stats(corpus, verify=True, batch_rows=batch_rows) == got


def test_iter_and_scan_are_the_corpus(corpus):
    import pyarrow as pa

    whole = read_corpus(corpus)
    batches = list(iter_corpus(corpus, batch_rows=64))
    assert max(b.num_rows for b in batches) <= 64
    assert pa.Table.from_batches(batches).equals(whole)
    cols = ["id", "labels"]
    assert pa.Table.from_batches(list(iter_corpus(corpus, columns=cols, batch_rows=5, verify=True))).equals(
        whole.select(cols))
    assert scan_corpus(corpus).collect().to_arrow().to_pylist() == whole.to_pylist()


def _export_in_memory(url: str, fmt: str, *, label_rule="hard", balance=None, drop=True, seed=0, tok=None):
    """``export_corpus``'s rows as they were computed before streaming (the whole corpus as Row objects)."""
    opts = ExportOptions(fmt, label_rule)
    rows, skipped, cut = [], {}, {}
    for r in read_corpus(url).to_pylist():
        labels, hard, _ = row_labels(r["labels"], r["mc_value"], opts)
        fill_holes(labels, hard, 1.0 if opts.soft else True)  # the holes the row's own labels settle
        row = Row(r["id"], r["problem"], list(r["steps"]), labels, r["solution_correct"])
        if fmt == "processbench":
            fe = next((i for i, h in enumerate(hard) if h is False), -1)
            if any(h is None for h in (hard if fe == -1 else hard[:fe])):
                skipped["undecided"] = skipped.get("undecided", 0) + 1
                continue
            row.labels = [True] * len(hard) if fe == -1 else [True] * fe + [False] + [None] * (len(hard) - fe - 1)
            row.has_error = fe != -1
            rows.append(row)
            continue
        row = cut_row(row, hard, drop, cut)
        if not row.steps:
            skipped["first_step_unlabeled"] = skipped.get("first_step_unlabeled", 0) + 1
            continue
        rows.append(row)
    if balance:
        rows = _balance(rows, seed, skipped)
    records = []
    for row in rows:
        rec = format_row(row, opts, tok)
        check_row(rec, row, opts, tok)
        records.append(rec)
    return records, skipped, cut


@pytest.mark.parametrize("fmt,label_rule,balance,drop", [
    ("trl", "hard", None, True), ("trl", "hard", "downsample", True), ("math-shepherd", "threshold", None, False),
    ("qwen-prm", "soft", "downsample", True), ("openrlhf", "soft", None, True), ("processbench", "hard", None, True),
    ("processbench", "hard", "downsample", True)])
def test_streamed_export_equals_in_memory(corpus, tmp_path, fmt, label_rule, balance, drop):
    want, skipped, cut = _export_in_memory(corpus, fmt, label_rule=label_rule, balance=balance, drop=drop, seed=3)
    res = export_corpus(corpus, fmt, str(tmp_path / "e"), label_rule=label_rule, balance=balance, seed=3,
                        drop_after_first_error=drop, shard_rows=100, batch_rows=13)
    assert load_export(str(tmp_path / "e")) == want
    assert res.rows == len(want) and res.skipped == skipped and res.cut == cut and res.corpus_rows == 503
    assert len(res.files) == max(1, -(-len(want) // 100))
    if balance:
        assert skipped.get("balance")
    # one batch (the whole corpus at once) writes the same bytes
    export_corpus(corpus, fmt, str(tmp_path / "one"), label_rule=label_rule, balance=balance, seed=3,
                  drop_after_first_error=drop, shard_rows=100, batch_rows=1_000_000)
    for f in res.files:
        name = f.rsplit("/", 1)[-1]
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "e" / name).read_bytes()
    assert not list(tmp_path.glob("*.mcprm-staging-*"))


def test_failed_check_leaves_an_earlier_export_untouched(corpus, tmp_path):
    from pipeline.export.common import ExportError

    out = tmp_path / "o"
    export_corpus(corpus, "math-shepherd", str(out), shard_rows=50)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ExportError, match="contains the step tag"):
        export_corpus(corpus, "math-shepherd", str(out), step_tag="step", overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == before
    assert not list(tmp_path.glob("*.mcprm-staging-*"))


def test_report_figures_from_streamed_counts(corpus, tmp_path):
    from pipeline.commands.report import _Figures

    agg = _Figures()
    for b in iter_corpus(corpus, batch_rows=17):
        agg.add(b)
    t = read_corpus(corpus).to_pylist()
    # the histogram holds the sampled steps only: an mc_value from draws of their own (not a last step's value
    # from the answer alone)
    mc = [v for r in t for i, v in enumerate(r["mc_value"])
          if v is not None and r["mc_total"][i] - (r.get("mc_reused") or [0] * len(r["mc_value"]))[i] > 0]
    assert agg.mc_n == len(mc) and sum(agg.mc) == len(mc)
    assert agg.mc_n + agg.answer_valued == sum(v is not None for r in t for v in r["mc_value"])
    bal = Counter((min(i, 20), y) for r in t for i, y in enumerate(r["labels"]))
    assert {(p, y): c for p, cs in agg.balance.items() for y, c in cs.items()} == dict(bal)
    assert agg.fe_hist == Counter(min(r["first_error"], 20) for r in t if r["first_error"] != -1)
    assert agg.correctness == Counter((r["solution_correct"], r["first_error"] != -1) for r in t)
    assert agg.rollouts == Counter(r["rollouts"] for r in t)
    assert agg.tokens == Counter(r["rollout_tokens"] for r in t)
    for s in ("per-step", "binary-search"):
        sel = [r for r in t if r["strategy"] == s]
        assert agg.by[s] == [sum(r["rollouts"] for r in sel), sum(r["rollout_tokens"] for r in sel), len(sel)]


@pytest.mark.parametrize("fmt", ["qwen-prm", "math-shepherd", "openrlhf"])
def test_streamed_export_with_tokenizer_equals_in_memory(corpus, tmp_path, fmt):
    from tests.pipeline.prm_fixtures import char_tokenizer

    tok = char_tokenizer()
    want, skipped, cut = _export_in_memory(corpus, fmt, tok=tok)
    res = export_corpus(corpus, fmt, str(tmp_path / "e"), tokenizer=tok, batch_rows=29)
    assert res.tokenizer_checked and load_export(str(tmp_path / "e")) == want
    assert res.skipped == skipped and res.cut == cut


def test_streamed_eval_against_the_checker_equals_a_reference_file(tmp_path):
    """Issue 17: ``evaluate(..., "synthetic")`` (rows streamed over several shards, each judged by the exact
    checker) gives the metrics of the same corpus against a ProcessBench file of the checker's verdicts."""
    import json

    import pyarrow as pa

    from pipeline.bundled.generator import generate_problems
    from pipeline.bundled.synthetic import check_steps
    from pipeline.commands.evaluate import evaluate

    rng = random.Random(7)
    rows, ref = [], []
    for i, p in enumerate(generate_problems(240, 9)):
        steps = list(p["steps"])
        if rng.random() < 0.5:
            steps[rng.randrange(len(steps))] += "1"
        truth = check_steps(p["problem"], steps).first_error
        fe = truth if rng.random() < 0.7 else rng.randrange(-1, len(steps))
        labels = [True] * len(steps) if fe == -1 else [True] * fe + [False] + [None] * (len(steps) - fe - 1)
        mc = [None if y is None else rng.choice([0.0, 0.5, 1.0]) if y else 0.0 for y in labels]
        rows.append({"id": f"p{i}", "key": f"k{i}", "problem": p["problem"], "answer": p["answer"], "steps": steps,
                     "prompt": p["problem"], "completions": steps, "labels": labels, "mc_value": mc,
                     "mc_correct": [int(2 * (v or 0)) for v in mc], "mc_total": [2] * len(steps),
                     "mc_ungradable": [0] * len(steps), "mc_no_answer": [0] * len(steps), "first_error": fe,
                     "solution_correct": truth == -1, "rollouts": 2 * len(steps), "rollout_tokens": 30 * len(steps),
                     "strategy": "per-step", "k": 2, "source": None})
        ref.append({"id": f"p{i}", "steps": steps, "label": truth})
    store = CorpusStore(str(tmp_path / "c"))
    shards = []
    for s, (a, b) in enumerate([(0, 100), (100, 101), (101, 240)]):
        rel = f"data/v00001/part-{s:05d}.parquet"
        shards.append({"path": rel, "rows": b - a,
                       **store.write_table(rel, pa.Table.from_pylist(rows[a:b], schema=arrow_schema()))})
    store.commit({"version": 1, "strategy": "per-step", "k": 2, "shards": shards, "schema_version": SCHEMA_VERSION})
    (tmp_path / "ref.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ref))
    for rule in (None, "threshold"):
        got = evaluate(str(tmp_path / "c"), "synthetic", label_rule=rule)
        want = evaluate(str(tmp_path / "c"), str(tmp_path / "ref.jsonl"), label_rule=rule)
        assert {k: v for k, v in got.items() if k != "reference"} == {k: v for k, v in want.items()
                                                                      if k != "reference"}
        assert got["solutions"] == 240 and got["unmatched"] == 0 and 0 < got["acc_error"] < 1


@pytest.mark.parametrize("balance,drop,verify,file_format", [
    (None, False, False, "parquet"), ("downsample", False, True, "parquet"), (None, True, True, "jsonl"),
    ("downsample", True, False, "jsonl")])
def test_trl_on_whole_columns_equals_row_by_row(corpus, tmp_path, balance, drop, verify, file_format):
    """Issue 17: trl with the corpus's labels is computed on whole columns; the same records, cut and skipped
    counts and step totals as the row-by-row computation, in sliced batches (verify) and in JSONL too."""
    want, skipped, cut = _export_in_memory(corpus, "trl", balance=balance, drop=drop, seed=5)
    res = export_corpus(corpus, "trl", str(tmp_path / "e"), balance=balance, seed=5, drop_after_first_error=drop,
                        shard_rows=60, batch_rows=17, verify=verify, file_format=file_format)
    assert load_export(str(tmp_path / "e")) == want
    assert (res.rows, res.skipped, res.cut) == (len(want), skipped, cut)
    assert list(res.cut) == list(cut) and list(res.skipped) == list(skipped)  # and the keys in the same order
    assert res.steps == sum(len(r["labels"]) for r in want) == res.positives + res.negatives
    assert res.positives == sum(y is True for r in want for y in r["labels"]) and res.unlabeled == 0
    assert len(res.files) == max(1, -(-len(want) // 60))


def test_trl_rows_of_unequal_lengths_still_fail_by_name(tmp_path):
    """A row whose labels and steps differ in length goes row by row (the whole batch), so its error names it;
    one whose first step is unlabeled is skipped as before."""
    import pyarrow as pa

    from pipeline.export.common import ExportError

    rows = _random_rows(30, seed=4)
    rows[3]["steps"] = rows[3]["steps"] + ["an extra step"]
    rows[3]["completions"] = rows[3]["steps"]
    rows[3]["labels"] = [True] * (len(rows[3]["steps"]) - 1)
    rows[3]["mc_value"] = [0.5] * len(rows[3]["labels"])
    store = CorpusStore(str(tmp_path / "c"))
    rel = "data/v00001/part-00000.parquet"
    store.write_table(rel, pa.Table.from_pylist(rows, schema=arrow_schema()))
    store.commit({"version": 1, "strategy": "per-step", "k": 8, "shards": [{"path": rel, "rows": 30}],
                  "schema_version": SCHEMA_VERSION})
    with pytest.raises(ExportError, match="row 'r3' \\(trl\\).*labels for"):
        export_corpus(str(tmp_path / "c"), "trl", str(tmp_path / "e"), batch_rows=8)
    assert not (tmp_path / "e").exists() or not list((tmp_path / "e").iterdir())
    rows[3]["labels"] = [None] * len(rows[3]["labels"])  # first step unlabeled: skipped, no check
    rows[3]["mc_value"] = [None] * len(rows[3]["labels"])
    store.write_table(rel, pa.Table.from_pylist(rows, schema=arrow_schema()))
    res = export_corpus(str(tmp_path / "c"), "trl", str(tmp_path / "e2"), batch_rows=8)
    assert "r3" not in {r["id"] for r in load_export(str(tmp_path / "e2"))}
    assert res.skipped.get("first_step_unlabeled", 0) >= 1 and res.rows + sum(res.skipped.values()) == 30


@pytest.mark.parametrize("balance,verify,file_format", [(None, True, "jsonl"), ("downsample", True, "parquet")])
def test_processbench_on_whole_columns_equals_row_by_row(corpus, tmp_path, balance, verify, file_format):
    want, skipped, _ = _export_in_memory(corpus, "processbench", balance=balance, seed=2)
    res = export_corpus(corpus, "processbench", str(tmp_path / "e"), balance=balance, seed=2, shard_rows=70,
                        batch_rows=19, verify=verify, file_format=file_format)
    assert load_export(str(tmp_path / "e")) == want
    assert (res.rows, res.skipped, list(res.skipped)) == (len(want), skipped, list(skipped))
    assert res.steps == sum(len(r["steps"]) for r in want) == res.positives + res.negatives + res.unlabeled
    assert res.negatives == sum(r["label"] != -1 for r in want)


def test_corpus_uncertainty_on_whole_columns_equals_row_by_row(corpus):
    """Issue 17: ``mcprm stats``/``report``'s uncertainty numbers, computed on whole columns, are the row-by-row
    loop's, to the last bit."""
    from pipeline.labeling.rules import corpus_uncertainty, straddles

    for t in (0.05, 0.3):
        unc = sampled = low = 0
        confs = []
        rows = read_corpus(corpus).to_pylist()
        for r in rows:
            for lab, lo, hi in zip(r["labels"], r["mc_low"], r["mc_high"]):
                if lab is not None and lo is not None:
                    sampled += 1
                    unc += straddles((lo, hi), t)
            if r["first_error_confidence"] is not None:
                confs.append(r["first_error_confidence"])
                low += r["first_error_confidence"] < 0.5
        got = corpus_uncertainty(corpus, t=t)
        assert got["mean_first_error_confidence"] == pytest.approx(sum(confs) / len(confs), rel=1e-6)
        assert got == {
            "threshold": t, "uncertain_steps": unc, "sampled_labeled_steps": sampled,
            "uncertain_rate": unc / sampled, "mean_first_error_confidence": got["mean_first_error_confidence"],
            "low_confidence_rows": low}
