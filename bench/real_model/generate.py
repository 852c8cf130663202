"""Generate responses of a real instruct model to bench/real_model/problems.py's problems (GPU machine script).

    python bench/real_model/generate.py --model-dir /tmp --gguf model.gguf --tok /tmp/tok --out $OUT/responses.jsonl

Loads Qwen2.5-Coder-1.5B-Instruct from its GGUF file with transformers (dequantized to bf16; needs the
``gguf`` package), builds each prompt with the model's chat template, and generates two responses per
problem in left-padded batches: one greedy, one sampled (temperature 0.7, top-p 0.95, seed 0), at most
``--max-new-tokens`` (512) new tokens. Writes JSON Lines: the problem's fields plus ``mode``, ``response``,
``n_new_tokens`` and ``finished`` (an end-of-turn token was produced). How the model gets to the device:
/work/shared/device/REAL-MODEL.md; the commands this bench used are in bench/real_model/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from problems import make_problems  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default="/tmp")
    ap.add_argument("--gguf", default="model.gguf")
    ap.add_argument("--tok", default="/tmp/tok")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="only the first N problems (smoke test)")
    ap.add_argument("--batch", type=int, default=300)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="greedy,sample")
    a = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    try:
        tok = AutoTokenizer.from_pretrained(a.tok)
    except Exception as e:  # tokenizer saved by another transformers version: rebuild it from the GGUF
        print(f"tokenizer from {a.tok} failed ({e!r}); loading it from the GGUF", flush=True)
        tok = AutoTokenizer.from_pretrained(a.model_dir, gguf_file=a.gguf)
    tok.padding_side = "left"
    kw = {}
    try:  # transformers 5 keeps GGUF weights packed (float32 kernels) unless asked to unpack them
        from transformers import GgufConfig

        kw["quantization_config"] = GgufConfig(gguf_file=a.gguf, dequantize=True)
    except ImportError:
        pass
    try:
        model = AutoModelForCausalLM.from_pretrained(
            a.model_dir, gguf_file=a.gguf, dtype=torch.bfloat16, **kw
        )
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(
            a.model_dir, gguf_file=a.gguf, torch_dtype=torch.bfloat16, **kw
        )
    model = model.to(a.device).eval()
    q = model.model.layers[0].self_attn.q_proj
    print(
        f"loaded in {time.time() - t0:.1f}s: {type(model).__name__}, q_proj {type(q).__name__} "
        f"{getattr(getattr(q, 'weight', None), 'dtype', None)}",
        flush=True,
    )

    stop_ids = [i for i in {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"),
                            tok.eos_token_id} if isinstance(i, int) and i >= 0]  # fmt: skip
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.convert_tokens_to_ids("<|endoftext|>")
    tok.pad_token_id = pad_id
    print(f"stop ids {stop_ids}, pad id {pad_id}", flush=True)

    probs = make_problems(a.n, a.seed)
    if a.limit:
        probs = probs[: a.limit]
    texts = [tok.apply_chat_template([{"role": "user", "content": p["prompt"]}], tokenize=False,
                                     add_generation_prompt=True) for p in probs]  # fmt: skip
    order = sorted(range(len(probs)), key=lambda i: len(texts[i]))
    out = open(a.out, "w", encoding="utf-8")
    for mode in a.modes.split(","):
        torch.manual_seed(a.seed)
        t1 = time.time()
        ntok = 0
        for s in range(0, len(order), a.batch):
            idx = order[s : s + a.batch]
            enc = tok([texts[i] for i in idx], return_tensors="pt", padding=True).to(a.device)
            kw = dict(max_new_tokens=a.max_new_tokens, eos_token_id=stop_ids, pad_token_id=pad_id)
            if mode == "greedy":
                kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            else:
                kw.update(do_sample=True, temperature=0.7, top_p=0.95, top_k=0)
            with torch.no_grad():
                gen = model.generate(**enc, **kw)
            new = gen[:, enc["input_ids"].shape[1] :].tolist()
            for i, ids in zip(idx, new):
                finished = any(t in stop_ids for t in ids)
                n = len(ids)
                for j, t in enumerate(ids):
                    if t in stop_ids:
                        n = j
                        break
                ntok += n
                resp = tok.decode(ids[:n], skip_special_tokens=True)
                rec = dict(probs[i], mode=mode, response=resp, n_new_tokens=n, finished=finished)
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            out.flush()
        dt = time.time() - t1
        print(
            f"{mode}: {len(order)} responses, {ntok} tokens in {dt:.1f}s ({ntok / dt:.0f} tok/s)", flush=True
        )
    out.close()
    print(f"total {time.time() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
