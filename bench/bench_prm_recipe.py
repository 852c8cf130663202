"""What limits the PRM on the bundled task: data, recipe, input layout or the model? Trained on the
exact checker's labels (the ceiling: perfect labels), measured against the exact checker on a fresh sample.

Each variant is ``mcprm train`` (:func:`pipeline.training.train.train`) on the first N solutions of a synthetic
sample (``data/make_sample.py``) labeled by the exact checker, with one setting changed; F1 is ProcessBench's
first-error F1 on another sample, at the PRM's own threshold (chosen on its validation problems) and, as an
optimistic bound, at the threshold best on the evaluation sample itself. ``--corpus`` trains on a labeled corpus's
own labels (``--label-rule``) instead.

The implicit-PRM row is the prototype (:func:`train_implicit`) of what became ``mcprm train --kind implicit``
(pipeline/training/implicit.py): the same base model and labels, the step score read through the LM head instead
of a new classification head. The rows of the recipe study in BENCHMARKS.md were measured with this prototype.

The reference row needs no training: the bundled model's own likelihood as a verifier (a step is wrong when one
of its tokens had probability below t under the model that wrote it; t chosen on the training labels). It says
how much of the truth the base model already holds, which the fine-tuned head does not recover.

The PRM recipe study this measured also had two rows of a pooling prototype (a step's score = its
worst token's P(good), with and without the newline separator), run at commit 446f37c and reverted since
(no better than the separator); ``git show 446f37c`` has its code (``TrainConfig(pooling="min")``, with
``separator="\\n", step_suffix=""`` for the second row).

    mkdir -p /tmp/tr /tmp/ev
    python data/make_sample.py --seed 7301 --n 1000 --out-dir /tmp/tr
    python data/make_sample.py --seed 7399 --n 600 --out-dir /tmp/ev
    python bench/bench_prm_recipe.py --train /tmp/tr/sample.jsonl --eval /tmp/ev/sample.jsonl --sizes 300 1000
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_label_rules_prm import exact_targets, f1_se  # noqa: E402

from pipeline.bundled.synthetic import PROMPT_TEMPLATE, check_steps, exact_corpus  # noqa: E402
from pipeline.training.metrics import choose_threshold, first_error_at, first_error_f1  # noqa: E402

# name -> (TrainConfig fields, extra layers on the base model)
VARIANTS: dict[str, tuple[dict, int]] = {
    "defaults": ({}, 0),
    "lr 3e-4": ({"learning_rate": 3e-4}, 0),
    "lr 1e-4, 20 epochs": ({"learning_rate": 1e-4, "epochs": 20}, 0),
    "no class balance": ({"class_balance": False}, 0),
    "separator = newline": ({"separator": "\n", "step_suffix": ""}, 0),
    "+2 layers (identity init)": ({}, 2),
}


def load_jsonl(path: str) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def expanded_base(src: str, extra: int, out: Path) -> str:
    """``src`` with ``extra`` decoder layers on top, each starting as the identity (output projections zero,
    LLaMA-Pro's block expansion): the same causal LM at step 0, more depth for the head to learn with."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(src)
    layers = model.model.layers
    n = len(layers)
    for j in range(extra):
        new = copy.deepcopy(layers[n - 1])
        torch.nn.init.zeros_(new.self_attn.o_proj.weight)
        torch.nn.init.zeros_(new.mlp.down_proj.weight)
        new.self_attn.layer_idx = n + j
        layers.append(new)
    model.config.num_hidden_layers = n + extra
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = list(model.config.layer_types) + [model.config.layer_types[-1]] * extra
    model.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(src).save_pretrained(out)
    return str(out)


def likelihood_scores(items: list[tuple[str, list[str]]]) -> list[list[float]]:
    """Per step: the least probability the bundled model gave one of the step's tokens (its line break left out:
    after the answer line the model ends the text instead)."""
    import torch
    import transformers

    from pipeline import bundled

    tok = transformers.AutoTokenizer.from_pretrained(bundled.model_dir())
    lm = transformers.AutoModelForCausalLM.from_pretrained(bundled.model_dir()).eval()
    out = []
    for problem, steps in items:
        ids = tok.encode(PROMPT_TEMPLATE.format(problem=problem), add_special_tokens=False)
        spans = []
        for s in steps:
            a = len(ids)
            ids += tok.encode(s + "\n", add_special_tokens=False)
            spans.append((a, len(ids) - 1))
        with torch.no_grad():
            lp = torch.log_softmax(lm(torch.tensor([ids])).logits[0].float(), -1)
        tok_lp = lp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]  # tok_lp[i] = log p(ids[i + 1])
        out.append([float(tok_lp[a - 1: b - 1].min().exp()) for a, b in spans])
    return out


def train_implicit(rows: list[dict], first_errors: list[int], epochs: int = 6, lr: float = 1e-4,
                   val_fraction: float = 0.1, seed: int = 0, batch: int = 16):
    """The prototype of ``mcprm train --kind implicit`` (kept so the study's rows can be rerun): an implicit PRM (Yuan et al. 2024, "Free Process Rewards without Process
    Labels") from the bundled model. Step k's log-odds of "the prefix up to k is good" is
    ``sum over the tokens of steps 0..k of (log p_theta - log p_ref) + b``, p_ref the bundled model frozen,
    p_theta a copy of it trained with class-balanced cross-entropy on the rows' step labels (up to the first
    error). The score is read through the LM head, so what the model expected at every token counts. The
    threshold is chosen on the validation problems. Returns (scorer(items) -> probs, threshold, seconds)."""
    import random

    import torch
    import transformers

    from pipeline import bundled
    from pipeline.training.targets import problem_group

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = transformers.AutoTokenizer.from_pretrained(bundled.model_dir())
    ref = transformers.AutoModelForCausalLM.from_pretrained(bundled.model_dir()).eval()
    pol = transformers.AutoModelForCausalLM.from_pretrained(bundled.model_dir())

    def enc(problem, steps):
        ids = tok.encode(PROMPT_TEMPLATE.format(problem=problem), add_special_tokens=False)
        spans = []
        for i, s in enumerate(steps):
            a = len(ids)
            ids += tok.encode(s + ("\n" if i < len(steps) - 1 else ""), add_special_tokens=False)
            spans.append((a, len(ids)))
        return ids, spans

    def tok_lp(model, ids):
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        return lp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]  # [i] = log p(ids[i + 1])

    def q_values(lp_diff, spans, bias):
        return torch.cumsum(torch.stack([lp_diff[a - 1: b - 1].sum() for a, b in spans]), 0) + bias

    t0 = time.time()
    train, val = [], []
    for r, fe in zip(rows, first_errors, strict=True):
        steps = list(r["steps"])
        ids, spans = enc(r["problem"], steps)
        n = len(steps) if fe == -1 else fe + 1
        y = torch.tensor([1.0] * n if fe == -1 else [1.0] * fe + [0.0])
        if problem_group(r["problem"]) < val_fraction:
            val.append((r["problem"], steps, fe))
        else:
            with torch.no_grad():
                lref = tok_lp(ref, ids)
            train.append((ids, spans[:n], lref, y))
    n_pos = sum(float(d[3].sum()) for d in train)
    n_neg = sum(float((1 - d[3]).sum()) for d in train)
    pw, nw = (n_pos + n_neg) / (2 * n_pos), (n_pos + n_neg) / (2 * max(n_neg, 1.0))
    bias = torch.zeros((), requires_grad=True)
    opt = torch.optim.AdamW([*pol.parameters(), bias], lr=lr, weight_decay=0.0)
    for _ in range(epochs):
        rng.shuffle(train)
        pol.train()
        for i in range(0, len(train), batch):
            loss, wsum = 0.0, 0.0
            for ids, spans, lref, y in train[i: i + batch]:
                q = q_values(tok_lp(pol, ids) - lref, spans, bias)
                w = pw * y + nw * (1 - y)
                loss = loss + (w * torch.nn.functional.binary_cross_entropy_with_logits(q, y, reduction="none")).sum()
                wsum += float(w.sum())
            opt.zero_grad()
            (loss / wsum).backward()
            opt.step()
    pol.eval()

    def scorer(items):
        out = []
        with torch.no_grad():
            for problem, steps in items:
                ids, spans = enc(problem, list(steps))
                out.append(torch.sigmoid(q_values(tok_lp(pol, ids) - tok_lp(ref, ids), spans, bias)).tolist())
        return out

    threshold = 0.5
    if val:
        threshold, _ = choose_threshold(scorer([(p, s) for p, s, _ in val]), [fe for _, _, fe in val])
    return scorer, threshold, time.time() - t0


def measure(probs, truth, threshold) -> dict:
    m = first_error_f1([first_error_at(p, threshold) for p in probs], truth)
    best_t, best = choose_threshold(probs, truth)
    return {"f1": m["f1"], "f1_se": f1_se(m), "acc_error": m["acc_error"], "acc_correct": m["acc_correct"],
            "threshold": threshold, "f1_best_threshold": best["f1"], "best_threshold": best_t}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True, help="synthetic solutions to train on (data/make_sample.py)")
    ap.add_argument("--eval", required=True, help="fresh synthetic solutions to measure on (another seed)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[300], help="train on the first N solutions")
    ap.add_argument("--variants", nargs="*", help=f"names (prefix match) of {list(VARIANTS)}; default all")
    ap.add_argument("--big-variants", nargs="*", default=["defaults"],
                    help="variants run at sizes above the first (default: defaults only)")
    ap.add_argument("--corpus", help="train on this labeled corpus's labels instead (sizes ignored)")
    ap.add_argument("--label-rule", default="hard")
    ap.add_argument("--no-likelihood", action="store_true", help="skip the likelihood reference row")
    ap.add_argument("--implicit-epochs", type=int, default=6,
                    help="epochs of the implicit-PRM prototype row (0: skip it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="folder for corpora and PRMs (default: a temporary one)")
    a = ap.parse_args(argv)

    from pipeline import bundled
    from pipeline.training.score import load_prm, predict_probs
    from pipeline.training.train import TrainConfig, train

    work = Path(a.work or tempfile.mkdtemp(prefix="bench-prm-recipe-"))
    work.mkdir(parents=True, exist_ok=True)
    train_rows = load_jsonl(a.train)
    ev = load_jsonl(a.eval)
    truth = [check_steps(r["problem"], r["steps"]).first_error for r in ev]
    items = [(r["problem"], r["steps"]) for r in ev]
    names = [n for n in VARIANTS if not a.variants or any(n.startswith(v) for v in a.variants)]
    sizes = [None] if a.corpus else a.sizes
    results = []
    for si, n in enumerate(sizes):
        if a.corpus:
            corpus, fn, what = a.corpus, None, f"{a.corpus} ({a.label_rule})"
        else:
            corpus = exact_corpus(train_rows[:n], work / f"exact-{n}") if not (work / f"exact-{n}").exists() \
                else str(work / f"exact-{n}")
            fn, what = exact_targets, f"exact, {n}"
        todo = names if si == 0 else [x for x in names if any(x.startswith(v) for v in a.big_variants)]
        for name in todo:
            opts, extra = VARIANTS[name]
            if extra:
                base = work / f"base-plus{extra}"
                opts = {**opts, "base_model": str(base) if base.exists() else
                        expanded_base(str(bundled.model_dir()), extra, base)}
            out = work / f"prm-{len(results)}"
            t0 = time.time()
            res = train(TrainConfig(corpus=corpus, output=str(out), seed=a.seed, progress=False, overwrite=True,
                                    label_rule=a.label_rule, **opts), targets_fn=fn)
            prm = load_prm(str(out), device="cpu")
            probs = predict_probs(prm.model, prm.tokenizer, prm.fmt, prm.sep_id, items)
            d = res.card["data"]
            row = {"variant": name, "train": what, "train_rows": d["train_rows"], "train_steps": d["train_steps"],
                   "seconds": round(time.time() - t0), **measure(probs, truth, prm.threshold)}
            results.append(row)
            print(json.dumps(row), flush=True)
    from pipeline.corpus import iter_corpus
    from pipeline.labeling.rules import apply_rule

    if a.corpus:
        rows = [r for b in iter_corpus(a.corpus) for r in b.to_pylist()]
        fit_truth = [apply_rule(r, a.label_rule).first_error for r in rows]
        what = f"{a.corpus} ({a.label_rule})"
    else:
        rows = train_rows[: sizes[0]]
        fit_truth = [check_steps(r["problem"], r["steps"]).first_error for r in rows]
        what = f"exact, {sizes[0]}"
    if a.implicit_epochs:
        scorer, thr, secs = train_implicit(rows, fit_truth, epochs=a.implicit_epochs, seed=a.seed)
        row = {"variant": f"implicit PRM (prototype, {a.implicit_epochs} epochs at 1e-4)", "train": what,
               "train_rows": len(rows), "train_steps": None, "seconds": round(secs),
               **measure(scorer(items), truth, thr)}
        results.append(row)
        print(json.dumps(row), flush=True)
    if not a.no_likelihood:
        t0 = time.time()
        t_fit, _ = choose_threshold(likelihood_scores([(r["problem"], list(r["steps"])) for r in rows]), fit_truth)
        row = {"variant": "reference: the base model's own likelihood (no training)", "train": what,
               "train_rows": len(rows), "train_steps": None, "seconds": round(time.time() - t0),
               **measure(likelihood_scores(items), truth, t_fit)}
        results.append(row)
        print(json.dumps(row), flush=True)
    lines = table(results, len(ev), sum(t != -1 for t in truth))
    print("\n".join(lines))


def table(rows, n, n_err) -> list[str]:
    def f(x, se=None):
        if x is None:
            return "n/a"
        return f"{x:.3f}" + (f" ± {se:.3f}" if se is not None else "")

    out = ["| variant | trained on (solutions) | F1 at its threshold | acc_error | acc_correct | threshold | "
           "F1 at the eval-best threshold | s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['variant']} | {r['train']} | {f(r['f1'], r['f1_se'])} | {f(r['acc_error'])} | "
                   f"{f(r['acc_correct'])} | {r['threshold']:.2f} | {f(r['f1_best_threshold'])} "
                   f"({r['best_threshold']:.2f}) | {r['seconds']} |")
    out.append(f"\nEval sample: {n} solutions, {n_err} with an error (exact checker).")
    return out


if __name__ == "__main__":
    main()
