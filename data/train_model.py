"""Train the bundled model: a tiny character-level Llama that solves the synthetic arithmetic task, imperfectly.

    python3 data/train_model.py --seed 0 --out data/model

writes ``data/model/`` (``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``, ``train_log.json``), which loads unchanged with ``AutoModelForCausalLM`` /
``AutoTokenizer`` on CPU and in vLLM. Training problems come from
``pipeline.bundled.generator.generate_problems(seed=TRAIN_SEED_BASE + seed)``, a seed range disjoint from the bundled
sample (``data/make_sample.py``) and the benchmark. The text of one example is the prompt format of
``pipeline.bundled.synthetic`` followed by the reference steps and EOS; the loss covers the solution only.

The model is meant to be an honest imperfect reasoner (it makes real arithmetic and ordering mistakes), so it
is small and trained briefly: the default settings take about 15-20 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import math
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.bundled.generator import generate_problems  # noqa: E402
from pipeline.bundled.synthetic import PROMPT_TEMPLATE, STEP_SEPARATOR  # noqa: E402

TRAIN_SEED_BASE = 1_000_000
SPECIAL_TOKENS = ["<pad>", "<eos>", "<unk>"]


def build_tokenizer():
    """Character-level tokenizer: one token per printable ASCII character, plus <pad>, <eos>, <unk>."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        clean_up_tokenization_spaces=False,
        model_max_length=512,
    )


def save_tokenizer(tokenizer, out: Path) -> None:
    tokenizer.save_pretrained(out)
    # Name a class that exists in transformers 4.x and 5.x so AutoTokenizer (and vLLM) never fall back to the
    # model_type's own tokenizer class, which would not understand this vocabulary.
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg.pop("backend", None)
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")


def encode_example(tokenizer, row: dict) -> tuple[list[int], int]:
    """Token ids of prompt + solution + EOS, and the prompt length (not trained on)."""
    prompt = PROMPT_TEMPLATE.format(problem=row["problem"])
    solution = STEP_SEPARATOR.join(row["steps"])
    p_ids = tokenizer.encode(prompt, add_special_tokens=False)
    s_ids = tokenizer.encode(solution, add_special_tokens=False)
    return p_ids + s_ids + [tokenizer.eos_token_id], len(p_ids)


def make_batch(torch, tokenizer, rows: list[dict], device):
    encoded = [encode_example(tokenizer, r) for r in rows]
    width = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(encoded):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
        attention[i, : len(ids)] = 1
    return input_ids.to(device), labels.to(device), attention.to(device)


def length_bucketed_batches(rows: list[dict], batch_size: int, rng) -> list[list[dict]]:
    """Batches of similar length (little padding: training on CPU is compute-bound), in random order."""
    rows = sorted(rows, key=lambda r: len(r["problem"]) + sum(len(s) + 1 for s in r["steps"]))
    batches = [rows[i : i + batch_size] for i in range(0, len(rows) - batch_size + 1, batch_size)]
    rng.shuffle(batches)
    return batches


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("data/model"))
    ap.add_argument("--steps", type=int, default=5000, help="optimizer steps")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=0, help="MLP width (default 4 * hidden)")
    ap.add_argument("--difficulty", default="medium")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu (the documented setting) or cuda (for quick trials)")
    ap.add_argument("--eval-every", type=int, default=500, help="greedy accuracy on 64 held-out problems")
    args = ap.parse_args(argv)

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = torch.device(args.device)

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        intermediate_size=args.intermediate or args.hidden * 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=512,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters, vocab {len(tokenizer)}", flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, args.steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))

    held_out = generate_problems(64, seed=TRAIN_SEED_BASE - 1 - args.seed, difficulty=args.difficulty)
    import random

    batch_rng = random.Random(args.seed)
    batches: list[list[dict]] = []
    log = []
    t0 = time.time()
    model.train()
    for step in range(args.steps):
        if not batches:
            batches = length_bucketed_batches(
                generate_problems(
                    50 * args.batch_size,
                    seed=TRAIN_SEED_BASE + args.seed * 100_000 + step,
                    difficulty=args.difficulty,
                ),
                args.batch_size,
                batch_rng,
            )
        rows = batches.pop()
        input_ids, labels, attention = make_batch(torch, tokenizer, rows, device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            entry = {"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(time.time() - t0, 1)}
            if args.eval_every and (step % args.eval_every == 0 or step == args.steps - 1) and step > 0:
                entry["greedy_acc"] = greedy_accuracy(torch, model, tokenizer, held_out, device)
                model.train()
            log.append(entry)
            print(json.dumps(entry), flush=True)

    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        max_new_tokens=256,
    )
    model.to("cpu").save_pretrained(args.out, safe_serialization=True)
    save_tokenizer(tokenizer, args.out)
    meta = {"args": {k: str(v) for k, v in vars(args).items()}, "parameters": n_params, "log": log}
    (args.out / "train_log.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"saved to {args.out} in {time.time() - t0:.0f}s", flush=True)


def greedy_accuracy(torch, model, tokenizer, rows: list[dict], device) -> float:
    """Share of ``rows`` whose greedy solution passes the exact checker end to end."""
    from pipeline.bundled.synthetic import check_steps, split_completion

    model.eval()
    tokenizer.padding_side = "left"
    prompts = [PROMPT_TEMPLATE.format(problem=r["problem"]) for r in rows]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    with torch.no_grad():
        out = model.generate(
            **enc,
            do_sample=False,
            max_new_tokens=256,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    ok = sum(
        check_steps(r["problem"], split_completion(t)).complete for r, t in zip(rows, texts, strict=True)
    )
    return round(ok / len(rows), 3)


if __name__ == "__main__":
    main()
