"""The PRM recipe table on real text: one PRM per recipe row, trained on one fixed labeled corpus, each measured
PRM-only on ProcessBench-MATH's dev part with the evaluation protocol (pipeline.training.protocol: step AUROC,
F1 at 0.5, at the PRM's own threshold, at a threshold cross-fitted over two halves of the problems) and at
best-of-8 on held-out problems, each against the first row (today's recipe) as a paired difference with its SE.

Every row is ``mcprm train`` (pipeline.training.train) with the corpus, the base model and ``--train-opts`` in
common and the row's own options; then ``mcprm score`` of PB-MATH dev and of the best-of-8 solutions (no answer
key: the numbers are the PRM's alone). Rows run one at a time and are kept in ``--results`` (one JSON line per
row, with the scored corpora under ``--work``), so a run cut by a device call's time limit goes on where it
stopped, and ``--table`` prints the table from what is there without a GPU. A row is trained again only with
``--redo``.

What chose the recipe stays apart from what reports it: PB-MATH's held-aside quarter is never read here (the
dev part is ``bench_human_labels.write_part(..., 'dev', ...)``), and best-of-8's aggregation (min, product,
last, vote) is chosen on 30% of the problems and read on the other 70%.

On the GPU machine (bench/gpu_e2e/data_run.sh has made $W/c_NAME, $W/pb/dev and $W/sols/heldout8.jsonl):

    python bench/bench_prm_recipe_table.py --corpus $W/c_base --base-model /tmp/qwen \\
        --pb-dev $W/pb/dev --bon $W/sols/heldout8.jsonl --work $W/recipe --results $OUT/recipe.jsonl \\
        --rows today defaults --score-max-length 4096
    python bench/bench_prm_recipe_table.py --work $W/recipe --results $OUT/recipe.jsonl --table

On a CPU, the plumbing with the bundled model: ``--smoke`` builds a small corpus, PB-like dev set and
best-of-8 set from the bundled sample in ``--work`` and runs every row on them (numbers meaningless).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# name -> TrainConfig fields beyond the defaults. "today" is the recipe before the protocol (the issue's
# measurement): class weights, the outcome threshold rule, the separator's row left as the resize made it.
ROWS: dict[str, dict] = {
    "today": {"class_balance": True, "threshold_rule": "outcome", "separator_init": "none"},
    "defaults": {},
    "separator newline": {"separator_init": "newline"},
    "chat header": {"header_style": "chat"},
    "head lr x10": {"head_lr_scale": 10.0},
    "head-only warm-up 10%": {"head_only_ratio": 0.1},
    "no class balance": {"class_balance": False},
    "threshold outcome": {"threshold_rule": "outcome"},
    "threshold f1": {"threshold_rule": "f1"},
    "tolerance 1": {"error_tolerance": 1},
    "solve-rate floor 0.3": {"solve_rate_floor": 0.3},
    "rule relative": {"label_rule": "relative"},
    "rule advantage": {"label_rule": "advantage"},
    "soft targets": {"targets": "soft", "label_rule": "soft"},
}
BASELINE = "today"
CHOOSE_ON = 0.3  # best-of-8: the share of problems that chooses the aggregation
N = 8


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def parse_opts(text: str) -> dict:
    """``--train-opts "epochs=3 learning_rate=1e-5"``: TrainConfig fields, values read as JSON where they parse."""
    out = {}
    for part in shlex.split(text or ""):
        k, _, v = part.partition("=")
        try:
            out[k.replace("-", "_")] = json.loads(v)
        except json.JSONDecodeError:
            out[k.replace("-", "_")] = v
    return out


def read_results(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    got = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            got[r["row"]] = r
    return got


def run_row(name: str, a, common: dict) -> dict:
    """Train, score PB-MATH dev and the best-of-8 set, measure; the row's JSON."""
    from pipeline.commands.evaluate import own_threshold, read_scored
    from pipeline.training.protocol import measure
    from pipeline.training.rerank import best_of_n
    from pipeline.training.score import score
    from pipeline.training.train import TrainConfig, train

    work = Path(a.work)
    prm = work / f"prm_{slug(name)}"
    t0 = time.perf_counter()
    res = train(TrainConfig(corpus=a.corpus, output=str(prm), base_model=a.base_model, progress=False,
                            overwrite=True, **{**common, **ROWS[name]}))
    train_s = round(res.seconds, 1)
    card = res.card
    speed = card["training"].get("speed") or {}
    gpus = card["hyperparameters"].get("world_size", 1)
    import gc

    import torch

    del res
    gc.collect()  # the Trainer's model and optimizer state go before the rows' scoring loads the PRM
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    on_gpu = torch.cuda.is_available()
    row = {"row": name, "options": ROWS[name], "common": common, "threshold": card["threshold"],
           "threshold_from": card["validation"].get("threshold_from"),
           "train_rows": card["data"]["train_rows"], "train_steps": card["data"]["train_steps"],
           # the Trainer's loop, times the GPUs it ran on (model loading and saving left out)
           "train_gpu_s": round(speed.get("seconds", card["training"]["seconds"]) * gpus, 1) if on_gpu else None,
           "train_s": train_s, "device": torch.cuda.get_device_name(0) if on_gpu else "cpu"}
    pb = work / f"sc_pb_{slug(name)}"
    score(str(prm), [str(Path(a.pb_dev) / "input.jsonl")], str(pb), overwrite=True, batch_size=a.batch_size,
          max_length=a.score_max_length, grade=False)
    sols, manifest = read_scored(str(pb), str(Path(a.pb_dev) / "reference.jsonl"))
    row["pb_dev"] = measure(sols, own_threshold(manifest))
    row["pb_reference"] = str((Path(a.pb_dev) / "reference.jsonl").resolve())
    if a.bon:
        bo = work / f"sc_bo_{slug(name)}"
        score(str(prm), [a.bon], str(bo), overwrite=True, batch_size=a.batch_size, max_length=a.score_max_length)
        got = best_of_n(str(bo), ns=[N], choose_fraction=CHOOSE_ON)
        sel = got["chosen"]["selector"]
        row["bon"] = {"selector": sel, "problems": got["problems"],
                      "accuracy": got["results"][0]["selectors"][sel]["accuracy"],
                      "se": got["results"][0]["selectors"][sel]["se"],
                      "majority": got["results"][0]["selectors"]["majority"]["accuracy"],
                      "vs_majority": got["results"][0]["selectors"][sel]["vs_majority"],
                      "vs_majority_se": got["results"][0]["selectors"][sel]["vs_majority_se"]}
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    if not a.keep_prms:  # a 1.5B PRM is 2.9 GB; the scored corpora are what the table reads
        import shutil

        (work / "cards").mkdir(exist_ok=True)
        shutil.copy(prm / "mcprm_card.json", work / "cards" / f"{slug(name)}.json")
        shutil.rmtree(prm)
    return row


def bon_outcomes(path: str, selector: str) -> dict[str, float]:
    """Per held-out problem (text): the outcome of ``selector`` at best-of-8 (the paired differences' input)."""
    from pipeline.training.rerank import answer_clusters, load_groups, outcomes, split_problems

    groups, _ = load_groups(path)
    _, held = split_problems(groups, CHOOSE_ON)
    out = {}
    for g in held:
        if len(g.cands) < N:
            continue
        cl = answer_clusters([c.answer for c in g.cands[:N]], g.problem)
        out[g.problem] = outcomes(g.cands[:N], cl)[selector]
    return out


def table(results: dict[str, dict], work: Path, reference: str | None, bootstrap: int) -> list[str]:
    """The markdown table; the differences with the baseline row recomputed from the scored corpora on disk."""
    from pipeline.commands.evaluate import compare
    from pipeline.training.rerank import mean_se

    def f(x, se=None, signed=False):
        if x is None:
            return "n/a"
        s = f"{x:+.3f}" if signed else f"{x:.3f}"
        return s + (f" ± {se:.3f}" if se is not None else "")

    base = results.get(BASELINE)
    lines = ["| row | step AUROC (Δ) | F1 at 0.5 (Δ) | F1 at own threshold (Δ) | own threshold | F1 cross-fitted (Δ) "
             "| F1 oracle | best-of-8 (Δ) | training GPU-s |", "|---|---|---|---|---|---|---|---|---|"]
    base_bon = None
    if base and base.get("bon"):
        base_bon = bon_outcomes(str(work / f"sc_bo_{slug(BASELINE)}"), base["bon"]["selector"])
    for name in ROWS:
        r = results.get(name)
        if r is None:
            continue
        p = r["pb_dev"]
        diffs = {}
        if base and name != BASELINE and reference:
            c = compare(str(work / f"sc_pb_{slug(name)}"), str(work / f"sc_pb_{slug(BASELINE)}"), reference,
                        bootstrap=bootstrap, seed=0)
            diffs = c["differences"]

        def cell(key, p=p, diffs=diffs):
            d = diffs.get(key)
            return f(p[key]) + (f" ({f(d['difference'], d['se'], True)})" if d and d["difference"] is not None
                                else "")

        bon = "n/a"
        if r.get("bon"):
            b = r["bon"]
            bon = f"{f(b['accuracy'], b['se'])} {b['selector']}"
            if base_bon is not None and name != BASELINE:
                mine = bon_outcomes(str(work / f"sc_bo_{slug(name)}"), b["selector"])
                common = [k for k in mine if k in base_bon]
                d, se = mean_se([mine[k] - base_bon[k] for k in common])
                bon += f" ({f(d, se, True)})"
        thr = "n/a" if p["own_threshold"] is None else f"{p['own_threshold']:.2f}"
        gpu_s = "n/a" if r.get("train_gpu_s") is None else f"{r['train_gpu_s']:.0f}"
        lines.append(f"| {name} | {cell('step_auroc')} | {cell('f1_at_0.5')} | {cell('f1_own')} | {thr} | "
                     f"{cell('f1_cross')} | {f(p['f1_oracle'])} | {bon} | {gpu_s} |")
    any_row = next(iter(results.values()), None)
    if any_row:
        p = any_row["pb_dev"]
        lines.append(f"\nPB-MATH dev: {p['solutions']} solutions ({p['solutions_with_error']} with an error), "
                     f"{p['steps_scored']} steps up to the reference's first error. Δ: minus the '{BASELINE}' row, "
                     f"± its SE (paired bootstrap over problems, {bootstrap} resamples; best-of-8: paired over the "
                     f"held-out problems, each row at the aggregation chosen on {CHOOSE_ON:.0%} of them). "
                     f"Device: {any_row.get('device')}.")
    return lines


def smoke_inputs(work: Path) -> tuple[str, str, str]:
    """A small labeled corpus (the exact checker's labels), a ProcessBench-like dev part and a best-of-8 set from
    the bundled sample, for the plumbing on a CPU."""
    from pipeline.bundled import SAMPLE_PATH
    from pipeline.bundled.synthetic import check_steps, exact_corpus

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines() if x.strip()]
    corpus = work / "smoke_corpus"
    if not corpus.exists():
        exact_corpus(rows[:60], corpus)
    dev = work / "smoke_pb"
    dev.mkdir(parents=True, exist_ok=True)
    with open(dev / "input.jsonl", "w") as fi, open(dev / "reference.jsonl", "w") as fr:
        for r in rows[60:120]:
            fi.write(json.dumps({"id": r["id"], "problem": r["problem"], "steps": r["steps"]}) + "\n")
            fr.write(json.dumps({"id": r["id"], "steps": r["steps"],
                                 "label": check_steps(r["problem"], r["steps"]).first_error}) + "\n")
    bon = work / "smoke_bon.jsonl"
    with open(bon, "w") as f:  # eight solutions a problem: the sample's own and seven with the answer changed
        for r in rows[120:150]:
            for j in range(N):
                steps = list(r["steps"])
                if j:
                    steps[-1] = f"The answer is \\boxed{{{1000 + j}}}."
                f.write(json.dumps({"id": f"{r['id']}-{j}", "problem": r["problem"], "steps": steps,
                                    "answer": r["answer"]}) + "\n")
    return str(corpus), str(dev), str(bon)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="the labeled corpus every row trains on")
    ap.add_argument("--base-model", help="the causal LM (default: the corpus's labeling model)")
    ap.add_argument("--pb-dev", help="folder with input.jsonl and reference.jsonl of PB-MATH's dev part")
    ap.add_argument("--bon", help="best-of-8 solutions (JSONL: problem, steps, answer; 8 per problem)")
    ap.add_argument("--work", required=True, help="folder of the PRMs and scored corpora")
    ap.add_argument("--results", required=True, help="JSONL of the rows measured (appended to)")
    ap.add_argument("--rows", nargs="*", help=f"rows to run (default: all not yet in --results): {list(ROWS)}")
    ap.add_argument("--redo", action="store_true", help="run the rows again even when --results has them")
    ap.add_argument("--train-opts", default="", help="TrainConfig fields every row shares, e.g. 'epochs=3'")
    ap.add_argument("--score-max-length", type=int, help="scoring's max tokens per solution (PB-MATH: 4096)")
    ap.add_argument("--batch-size", type=int, default=64, help="scoring batch size")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--keep-prms", action="store_true", help="keep each row's PRM folder (default: its card only)")
    ap.add_argument("--table", action="store_true", help="print the table from --results and stop")
    ap.add_argument("--smoke", action="store_true", help="the bundled model's plumbing run on a CPU")
    a = ap.parse_args(argv)
    work, results_path = Path(a.work), Path(a.results)
    work.mkdir(parents=True, exist_ok=True)
    if a.smoke:
        a.corpus, a.pb_dev, a.bon = smoke_inputs(work)
        a.train_opts = a.train_opts or "kind=head epochs=1 val_fraction=0.2"
    results = read_results(results_path)
    if not a.table:
        if not (a.corpus and a.pb_dev):
            ap.error("--corpus and --pb-dev are needed to run rows (or --table, or --smoke)")
        unknown = [r for r in (a.rows or []) if r not in ROWS]
        if unknown:
            ap.error(f"unknown rows {unknown}; rows: {list(ROWS)}")
        common = parse_opts(a.train_opts)
        todo = [r for r in (a.rows or list(ROWS)) if a.redo or r not in results]
        from pipeline.errors import FatalError

        for name in todo:
            try:
                row = run_row(name, a, common)
            except FatalError as e:  # e.g. the chat header for a tokenizer without a chat template
                print(f"row {name!r}: {e}", file=sys.stderr, flush=True)
                continue
            results[name] = row
            with open(results_path, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: row[k] for k in ("row", "train_gpu_s", "wall_s")} | {
                "step_auroc": row["pb_dev"]["step_auroc"], "f1_own": row["pb_dev"]["f1_own"]}), flush=True)
    ref = str(Path(a.pb_dev) / "reference.jsonl") if a.pb_dev else None
    if ref is None:
        ref = next((str(Path(r["pb_reference"])) for r in results.values() if r.get("pb_reference")), None)
    print("\n".join(table(results, work, ref, a.bootstrap)))


if __name__ == "__main__":
    main()
