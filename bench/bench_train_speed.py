"""PRM training speed on a GPU: tokens/s and model FLOPs utilization (MFU) of `mcprm train`, one GPU or several.

What it trains: a Qwen2.5-1.5B-shaped model (28 layers, hidden 1536, 12 heads / 2 KV heads, MLP 8960, vocab 151,936,
bf16, random weights: speed does not depend on the weights) under the token-classification head, on a corpus of
N rows whose text is the real 1.5B model's 400 GSM8K-train solutions (bench/gpu_e2e/solutions400.jsonl) repeated,
with random step labels. The tokenizer is a byte-level BPE trained on those texts (the real model's tokenizer does
not ship here); its lengths are printed so they can be compared with the real one's.

    python bench/bench_train_speed.py prepare --out /tmp/ts --rows 10000      # base model + corpus
    python bench/bench_train_speed.py run --out /tmp/ts --tag b16 [-- TRAIN OPTIONS]   # one GPU, one epoch
    torchrun --nproc-per-node 4 -m cli.main train /tmp/ts/corpus --base-model /tmp/ts/base ...  # several GPUs
    python bench/bench_train_speed.py report --out /tmp/ts CARD.json ...         # the table

MFU = tokens/s x FLOPs per token / (GPUs x peak); the whole training's, and the steady one after the first
10% of the optimizer steps (where the compile and the kernels' first runs fall; the card's ``speed``). FLOPs per token (PaLM's count): 6 x non-embedding parameters
+ 12 x layers x hidden x sequence length (attention, not halved for the causal mask), on the rows' real tokens
(padding is not useful work). Peak: 989 TFLOP/s, an H100 SXM's dense bf16 (an H200's is the same).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOLUTIONS = ROOT / "bench" / "gpu_e2e" / "solutions400.jsonl"
PEAK_BF16 = 989e12
SHAPE = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
             num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
             tie_word_embeddings=True, rms_norm_eps=1e-6)


def prepare(out: Path, rows: int, seed: int = 0, corpus: str = "corpus", tiny: bool = False) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from pipeline.solution import LabeledSolution, Solution, StepStats
    from pipeline.storage.schema import to_table
    from pipeline.storage.store import CorpusStore

    sols = [json.loads(x) for x in SOLUTIONS.read_text().splitlines() if x.strip()]
    texts = [s["problem"] for s in sols] + [st for s in sols for st in s["steps"]]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=32000, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    base = out / "base"
    if not (base / "config.json").exists():
        torch.manual_seed(seed)
        shape = dict(SHAPE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, vocab_size=32000) if tiny else SHAPE  # tiny: a smoke test on a CPU
        cfg = Qwen2Config(**shape, dtype="bfloat16")
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
        model.save_pretrained(base)
        tok.save_pretrained(base)
    rng = random.Random(seed)
    labeled = []
    for i in range(rows):
        s = sols[i % len(sols)]
        n = len(s["steps"])
        fe = rng.randrange(n) if rng.random() < 0.4 else -1
        labels = [True] * n if fe == -1 else [True] * fe + [False] * (n - fe)
        sol = Solution(id=f"r{i}", problem=s["problem"] + ("" if i < len(sols) else f" (copy {i // len(sols)})"),
                       answer=s["answer"], steps=tuple(s["steps"]))
        labeled.append(LabeledSolution(sol, labels, [StepStats() for _ in range(n)], fe, fe == -1, rollouts=0,
                                       rollout_tokens=0, strategy="per-step"))
    store = CorpusStore(str(out / corpus))
    store.write_table("data/v00001/part-00000.parquet", to_table(labeled, 0))
    store.commit({"version": 1, "strategy": "per-step", "k": 0, "schema_version": 4, "config": {},
                  "shards": [{"path": "data/v00001/part-00000.parquet", "rows": len(labeled)}]})
    lens = [len(tok(s["problem"] + "\n".join(s["steps"]))["input_ids"]) for s in sols]
    print(json.dumps({"prepared": str(out), "rows": rows, "tokens_per_solution_mean": sum(lens) / len(lens),
                      "chars_per_token": sum(len(s["problem"] + "\n".join(s["steps"])) for s in sols) / sum(lens)}))


def flops_per_token(card: dict, base: str) -> float:
    """PaLM's count at the corpus's mean row length (module doc)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(base)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    n = sum(p.numel() for p in m.parameters()) - m.get_input_embeddings().weight.numel()
    sp = card["training"]["speed"]
    rows = card["data"]["train_rows"]
    mean_len = sp["tokens_per_epoch"] / max(1, rows)
    return 6 * n + 12 * cfg.num_hidden_layers * cfg.hidden_size * mean_len


def summarize(card: dict, base: str, gpus: int, wall_s: float | None = None, tag: str = "") -> dict:
    sp = card["training"]["speed"]
    fpt = flops_per_token(card, base)
    tps = sp["tokens_per_s"]
    steady = sp.get("steady_tokens_per_s")
    return {"tag": tag, "gpus": gpus, "rows": card["data"]["train_rows"], "epochs": card["hyperparameters"]["epochs"],
            "batch_size": card["hyperparameters"]["batch_size"],
            "max_batch_tokens": card["hyperparameters"].get("max_batch_tokens"),
            "tokens_per_epoch": sp["tokens_per_epoch"], "padded_tokens_per_epoch": sp["padded_tokens_per_epoch"],
            "train_s": sp["seconds"], "command_s": wall_s, "tokens_per_s": tps,
            "tokens_per_s_per_gpu": tps / gpus, "mfu": tps * fpt / (gpus * PEAK_BF16),
            "steady_tokens_per_s": steady, "steady_mfu": steady * fpt / (gpus * PEAK_BF16) if steady else None,
            "warmup_s": sp.get("warmup_seconds"), "compile": card["hyperparameters"].get("compile"),
            "gpu_seconds": sp["seconds"] * gpus, "optimizer_steps": card["training"]["steps"],
            "skipped_steps": card["training"]["skipped_steps"], "bf16": card["hyperparameters"]["bf16"],
            "non_finite": card["training"].get("non_finite")}


def run(out: Path, tag: str, extra: list[str], corpus: str = "corpus") -> dict:
    import subprocess

    prm = out / f"prm-{tag}"
    cmd = [sys.executable, "-m", "cli.main", "train", str(out / corpus), "--output", str(prm), "--base-model",
           str(out / "base"), "--kind", "head", "--epochs", "1", "--val-fraction", "0", "--no-progress",
           "--overwrite", *extra]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    wall = time.perf_counter() - t
    card = json.loads((prm / "mcprm_card.json").read_text())
    row = summarize(card, str(out / "base"), 1, wall, tag)
    print(json.dumps(row))
    return row


def table(rows: list[dict]) -> None:
    cols = ["tag", "gpus", "rows", "batch_size", "tokens_per_epoch", "padded_tokens_per_epoch", "train_s",
            "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "steady_tokens_per_s", "steady_mfu", "warmup_s",
            "gpu_seconds", "skipped_steps"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["prepare", "run", "report"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--tag", default="default")
    ap.add_argument("--corpus", default="corpus", help="the corpus folder's name under --out")
    ap.add_argument("--tiny", action="store_true", help="prepare: a tiny model of the same family (CPU smoke test)")
    ap.add_argument("--gpus", type=int, default=1, help="report: the GPUs a card's run used")
    ap.add_argument("rest", nargs="*")
    a, unknown = ap.parse_known_args()
    a.rest = [*a.rest, *unknown]  # run: the options after the tag go to `mcprm train`
    if a.what == "prepare":
        prepare(a.out, a.rows, corpus=a.corpus, tiny=a.tiny)
    elif a.what == "run":
        run(a.out, a.tag, a.rest, a.corpus)
    else:
        rows = []
        for spec in a.rest:  # CARD.json[:GPUS]
            path, _, g = spec.partition(":")
            card = json.loads(Path(path).read_text())
            rows.append(summarize(card, str(a.out / "base"), int(g or a.gpus), None, Path(path).parent.name))
        table(rows)
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
