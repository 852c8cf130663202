"""The recipe options of ``mcprm train`` on CPU with the real bundled model: the separator's embedding row, the
chat-template header, the head's learning rate and head-only warm-up, class balance and what it does to the
scores, the threshold rules, and the targets' tolerance and solve-rate weights."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from pipeline.bundled import MODEL_DIR, SAMPLE_PATH  # noqa: E402
from pipeline.training.options import TrainConfig, TrainError  # noqa: E402


def _corpus(path, n=40):
    from pipeline.bundled.synthetic import exact_corpus

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:n]]
    exact_corpus(rows, path)
    return rows


def _cfg(tmp_path, name, **kw):
    base = dict(corpus=str(tmp_path / "corpus"), output=str(tmp_path / name), kind="head", epochs=1,
                progress=False, seed=0, val_fraction=0.0)
    base.update(kw)
    return TrainConfig(**base)


def test_a_new_separator_gets_a_trained_embedding_row(tmp_path):
    import transformers

    from pipeline.training.base import load_base

    torch.set_num_threads(1)
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL_DIR)).get_input_embeddings().weight
    n = ref.shape[0]
    model, tok, sep, added = load_base(str(MODEL_DIR), "<extra_0>", "head", "mean")
    assert added and sep == n  # the bundled vocabulary has no spare row: the embeddings grew
    row = model.get_input_embeddings().weight[sep]
    assert torch.allclose(row, ref.mean(0), atol=1e-6)
    model, tok, sep, _ = load_base(str(MODEL_DIR), "<extra_0>", "head", "newline")
    nl = tok.encode("\n", add_special_tokens=False)[0]
    assert torch.equal(model.get_input_embeddings().weight[sep], ref[nl])
    # a padded vocabulary (more rows than tokens, as Qwen2.5's): the separator lands on a reserved row, which
    # no resize touches; it is set all the same
    padded = tmp_path / "padded"
    lm = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL_DIR))
    lm.resize_token_embeddings(n + 29, mean_resizing=False)
    with torch.no_grad():
        lm.get_input_embeddings().weight[n:] = 7.0  # what an untrained reserved row might hold
    lm.save_pretrained(padded)
    transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR)).save_pretrained(padded)
    model, _, sep, added = load_base(str(padded), "<extra_0>", "head", "mean")
    w = model.get_input_embeddings().weight
    assert added and w.shape[0] == n + 29 and sep == n
    assert torch.allclose(w[sep], ref.mean(0), atol=1e-6)  # the tokens' rows, not the reserved ones
    model, _, sep, _ = load_base(str(padded), "<extra_0>", "head", "none")
    assert torch.all(model.get_input_embeddings().weight[sep] == 7.0)


def test_head_only_warm_up_leaves_the_body_and_the_head_learns_at_its_scale(tmp_path):
    import transformers

    from pipeline.training.trainer import head_parameter_names, part_schedule

    _corpus(tmp_path / "corpus", n=16)
    torch.set_num_threads(1)
    res = __import__("pipeline.training.train", fromlist=["train"]).train(
        _cfg(tmp_path, "probe", head_only_ratio=1.0, head_lr_scale=10.0, epochs=2))
    assert res.card["hyperparameters"]["head_only_steps"] == res.card["training"]["steps"] > 0
    base = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL_DIR)).state_dict()
    got = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "probe")
    head = head_parameter_names(got)
    assert head == {"score.weight"} or head == {"score.weight", "score.bias"}
    for name, p in got.named_parameters():
        if name in head:
            continue
        src = base[name]
        if name.endswith("embed_tokens.weight"):  # the separator's new row is the mean, not trained
            p = p[: src.shape[0]]
        assert torch.equal(p.detach(), src), name
    # half the steps head-only: the body moves afterwards
    _ = __import__("pipeline.training.train", fromlist=["train"]).train(
        _cfg(tmp_path, "half", head_only_ratio=0.5, epochs=2, batch_size=2))
    got = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "half")
    moved = [n for n, p in got.named_parameters() if n not in head and not n.endswith("embed_tokens.weight")
             and not torch.equal(p.detach(), base[n])]
    assert moved
    # the schedule: the body's part starts at its own step with its own warm-up
    assert [part_schedule(s, 4, 2, 10) for s in (0, 3, 4, 5, 6, 10)] == [0, 0, 0, 0.5, 1.0, 0.0]
    assert part_schedule(0, 0, 0, 10) == 1.0


def test_head_lr_scale_puts_the_head_in_its_own_param_groups(tmp_path):
    from transformers import TrainingArguments

    from pipeline.training.base import load_base
    from pipeline.training.collate import DEFAULT_SEPARATOR, PrmFormat, make_example
    from pipeline.training.trainer import make_trainer, train_batches

    model, tok, sep, _ = load_base(str(MODEL_DIR), DEFAULT_SEPARATOR, "head")
    fmt = PrmFormat()
    ex = [make_example(tok, fmt, sep, "Compute 1+1.", ["1+1=2", "The answer is 2"], [1.0, 0.0])]
    args = TrainingArguments(output_dir=str(tmp_path / "o"), learning_rate=2e-3, report_to=[], use_cpu=True,
                             weight_decay=0.1)
    tr = make_trainer(model=model, args=args, train_examples=ex, eval_examples=[], batches=train_batches(ex, 4, 1024, 0),
                      pad_id=tok.pad_token_id, pos_weight=1, neg_weight=1, implicit=False, head_lr_scale=5.0)
    opt = tr.create_optimizer()
    lrs = {(g["mcprm_head"], g["weight_decay"] > 0): g["lr"] for g in opt.param_groups}
    assert lrs[(True, True)] == pytest.approx(1e-2) and lrs[(False, True)] == pytest.approx(2e-3)
    n_params = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n_params == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_class_balance_shifts_the_scores_off_the_label_rate(tmp_path):
    """Trained without class weights the PRM's mean score on its training steps sits near their share of good
    steps (a fitted logistic model's calibration in the large); with them it is pulled towards 0.5, so 0.5
    stops meaning "as likely wrong as right"."""
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import train

    rows = _corpus(tmp_path / "corpus", n=60)
    torch.set_num_threads(1)
    means = {}
    for bal in (False, True):
        res = train(_cfg(tmp_path, f"b{int(bal)}", class_balance=bal, head_only_ratio=1.0, head_lr_scale=10.0,
                         epochs=8))
        d = res.card["data"]
        share = d["train_positive"] / d["train_steps"]
        prm = load_prm(str(tmp_path / f"b{int(bal)}"), device="cpu")
        probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, [(r["problem"], r["steps"]) for r in rows])
        from pipeline.bundled.synthetic import check_steps

        got = []
        for r, p in zip(rows, probs, strict=True):
            fe = check_steps(r["problem"], r["steps"]).first_error
            got.extend(p[: len(p) if fe == -1 else fe + 1])
        means[bal] = sum(got) / len(got)
    assert share > 0.6  # mostly good steps: balance weighs the bad ones up
    assert abs(means[False] - share) < 0.08, (means, share)
    assert means[True] < means[False] - 0.08, means


def test_threshold_rules(tmp_path):
    from pipeline.training.train import train

    _corpus(tmp_path / "corpus", n=40)
    torch.set_num_threads(1)
    half = train(_cfg(tmp_path, "h", val_fraction=0.3)).card
    assert half["threshold"] == 0.5 and "in_sample" not in half["validation"]
    assert half["validation"]["threshold_from"].startswith("--threshold-rule 0.5")
    f1 = train(_cfg(tmp_path, "f", val_fraction=0.3, threshold_rule="f1")).card
    assert f1["threshold"] == f1["validation"]["f1_best_threshold"]
    assert "Monte Carlo first errors" in f1["validation"]["threshold_from"]
    with pytest.raises(TrainError, match="--threshold-rule must be one of"):
        _cfg(tmp_path, "x", threshold_rule="best").validate()


def test_chat_header_reads_the_base_models_template(tmp_path):
    import transformers

    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import train

    _corpus(tmp_path / "corpus", n=12)
    torch.set_num_threads(1)
    with pytest.raises(TrainError, match="no chat template.*--header-style plain"):
        train(_cfg(tmp_path, "plain-tok", header_style="chat"))
    chat = tmp_path / "chat-base"
    tok = transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR))
    tok.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<assistant>{% endif %}")
    tok.save_pretrained(chat)
    transformers.AutoModelForCausalLM.from_pretrained(str(MODEL_DIR)).save_pretrained(chat)
    card = train(_cfg(tmp_path, "c", header_style="chat", base_model=str(chat))).card
    assert card["prm_format"]["header"] == "<user>{problem}\n<assistant>"
    assert card["prm_format"]["add_bos"] is False
    prm = load_prm(str(tmp_path / "c"), device="cpu")
    assert prm.fmt.header == "<user>{problem}\n<assistant>"
    probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, [("Compute 1+1.", ["1+1=2", "2"])])
    assert len(probs[0]) == 2 and all(0 < p < 1 for p in probs[0])


def test_error_tolerance_and_solve_rate_weights(tmp_path):
    from pipeline.training.collate import PrmFormat
    from pipeline.training.targets import prepare, row_tries, shape_weights, solve_rate, solve_totals
    from tests.pipeline.prm_fixtures import ROWS, char_tokenizer, make_corpus

    assert shape_weights([1.0, 1.0, 1.0, 0.0], [1.0] * 4, 3, tolerance=2) == [1.0, 0.0, 0.0, 1.0]
    assert shape_weights([1.0, 0.0], [1.0, 1.0], 1, negative_scale=0.25) == [1.0, 0.25]
    assert shape_weights([0.0], [1.0], 0, tolerance=3) == [1.0]  # nothing before a step-0 error
    make_corpus(tmp_path / "c")
    # s2: its step 0 reached the answer 2 of 4 times, its own answer is wrong
    s2 = {"problem": "Problem s2: compute it.", "solution_correct": False, "mc_correct": [2, 0, 0, 0],
          "mc_total": [4, 4, 4, 0], "mc_ungradable": [0, 0, 0, 0]}
    assert row_tries(s2) == (2, 5)
    totals = solve_totals(TrainConfig(corpus=str(tmp_path / "c"), output=""))
    assert totals["Problem s2: compute it."] == (2, 5)
    assert solve_rate(totals, s2) is None  # its only row: no other evidence on the problem
    tok = char_tokenizer()
    sep = tok.convert_tokens_to_ids("<extra_0>")
    fmt = PrmFormat()

    def weights(corpus, **kw):
        cfg = TrainConfig(corpus=str(corpus), output="", val_fraction=0.0, **kw)
        return [e.weights for e in prepare(cfg, tok, fmt, sep).train]

    plain, tol = weights(tmp_path / "c"), weights(tmp_path / "c", error_tolerance=1)
    # s2 (index 1): hard labels good, bad (first error at 1): tolerance 1 takes step 0's loss away
    assert plain[1][:2] == [1.0, 1.0] and tol[1][:2] == [0.0, 1.0]
    assert weights(tmp_path / "c", solve_rate_floor=0.8) == plain  # one row a problem: no rate, no change
    assert len(ROWS) == len(plain)
    # a problem three other solutions solve keeps its wrong one's negatives at full weight; one whose other
    # solution is wrong too and whose first steps' continuations reach the answer 1 time in 4 keeps 0.4 of them
    shared(tmp_path / "shared", [("w1", "P", [(2, 4), (0, 4)], False)]
           + [(f"r{i}", "P", [(4, 4), (4, 4)], True) for i in range(3)]
           + [("w2", "Q", [(1, 4), (0, 4)], False), ("w3", "Q", [(1, 4), (0, 4)], False)])
    w = weights(tmp_path / "shared", solve_rate_floor=0.5)
    assert w[0] == [1.0, 1.0] and w[1:4] == [[1.0, 1.0]] * 3
    assert w[4] == [1.0, pytest.approx(0.4)] and w[5] == [1.0, pytest.approx(0.4)]  # (0 + 1) / (1 + 4) = 0.2


def shared(path, items):
    """A corpus of (id, problem, (correct, total) per step, solution correct): several rows a problem."""
    from pipeline.solution import LabeledSolution, Solution, StepStats
    from pipeline.storage.schema import to_table
    from pipeline.storage.store import CorpusStore

    labeled = []
    for sid, problem, counts, correct in items:
        stats = []
        for c, n in counts:
            st = StepStats()
            st.correct, st.total = c, n
            st.first_correct, st.first_n = st.deep_correct, st.deep_n = c, n
            stats.append(st)
        labels = [c > 0 for c, _ in counts]
        fe = next((i for i, x in enumerate(labels) if not x), -1)
        sol = Solution(id=sid, problem=f"Problem {problem}.", answer="5", steps=tuple(f"{sid} {j}" for j in
                                                                                   range(len(counts))))
        labeled.append(LabeledSolution(sol, labels, stats, fe, correct, rollouts=8, rollout_tokens=80,
                                       strategy="per-step"))
    store = CorpusStore(str(path))
    store.write_table("data/v00001/part-00000.parquet", to_table(labeled, 4))
    store.commit({"version": 1, "strategy": "per-step", "k": 4,
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}]})


def test_the_cli_passes_every_recipe_option(tmp_path):
    import subprocess
    import sys

    _corpus(tmp_path / "corpus", n=16)
    r = subprocess.run([sys.executable, "-m", "cli.main", "train", str(tmp_path / "corpus"), "--output",
                        str(tmp_path / "p"), "--kind", "head", "--epochs", "1", "--batch-size", "4", "--no-progress",
                        "--val-fraction", "0.3", "--head-lr-scale", "2", "--head-only-ratio", "0.5",
                        "--threshold-rule", "f1", "--error-tolerance", "1", "--solve-rate-floor", "0.5",
                        "--separator-init", "newline", "--class-balance", "--header-style", "plain"],
                       capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                        "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    card = json.loads((tmp_path / "p" / "mcprm_card.json").read_text())
    c = card["config"]
    assert (c["head_lr_scale"], c["head_only_ratio"], c["threshold_rule"], c["error_tolerance"],
            c["solve_rate_floor"], c["separator_init"], c["class_balance"], c["header_style"]) == (
        2.0, 0.5, "f1", 1, 0.5, "newline", True, "plain")
    assert card["hyperparameters"]["head_only_steps"] > 0 and card["hyperparameters"]["neg_weight"] != 1.0
    r = subprocess.run([sys.executable, "-m", "cli.main", "train", str(tmp_path / "corpus"), "--output",
                        str(tmp_path / "q"), "--kind", "implicit", "--head-lr-scale", "3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1 and "--kind head" in r.stderr and "Traceback" not in r.stderr
