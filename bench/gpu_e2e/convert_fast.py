"""The GGUF's weights straight to bf16 safetensors, for a machine that has the rest of the model folder already.

    python bench/gpu_e2e/convert_fast.py /tmp/model.gguf META.tar.gz /tmp/qwen      (on the GPU machine)
    python bench/gpu_e2e/convert_fast.py --meta REFERENCE_DIR META.tar.gz           (here, once)
    python bench/gpu_e2e/convert_fast.py --check /tmp/model.gguf REFERENCE_DIR      (here: the same tensors?)

``convert.py`` goes through transformers: it parses the GGUF's metadata (151,936 tokens, in Python) once for the
config, once for the weights and again for the tokenizer, and builds the model twice; on the GPU machine that was
166 s of device time at every set-up. The config, generation config, tokenizer and chat template are the same
every time, so they are made here once from a ``convert.py`` folder (``--meta``, a 2 MB file carried with the
set-up), and the GPU machine only dequantizes the tensors (gguf's own numpy kernels), renames them to the Hugging
Face names and writes them. ``--check`` compares every tensor with a ``convert.py`` folder, bit for bit in bf16.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tarfile
import time

META_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "chat_template.jinja", "special_tokens_map.json")

# llama.cpp's Qwen2 tensor names -> transformers' (no Q/K permutation for this architecture)
GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}
BLOCK = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
         "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
         "attn_output.weight": "self_attn.o_proj.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
         "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}


def hf_name(name: str) -> str:
    if name in GLOBAL:
        return GLOBAL[name]
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
    if not m or m[2] not in BLOCK:
        raise ValueError(f"unknown GGUF tensor {name!r}")
    return f"model.layers.{m[1]}.{BLOCK[m[2]]}"


def tensors(src: str, tied: bool):
    """(HF name, bf16 torch tensor) for every tensor of the GGUF; ``lm_head`` left out when the config ties it."""
    import gguf
    import numpy as np
    import torch

    reader = gguf.GGUFReader(src)
    for t in reader.tensors:
        name = hf_name(t.name)
        if tied and name == "lm_head.weight":
            continue
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        a = np.array(a.reshape([int(d) for d in reversed(t.shape)]), dtype=np.float32)  # (a copy: writable)
        yield name, torch.from_numpy(a).to(torch.bfloat16)


def convert(src: str, meta: str, dst: str) -> int:
    from safetensors.torch import save_file

    t0 = time.time()
    os.makedirs(dst, exist_ok=True)
    with tarfile.open(meta) as tf:
        tf.extractall(dst, filter="data")
    cfg = json.load(open(os.path.join(dst, "config.json")))
    out = dict(tensors(src, bool(cfg.get("tie_word_embeddings"))))
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    n = sum(v.numel() for v in out.values())
    print(f"converted in {time.time() - t0:.1f}s: {len(out)} tensors, {n / 1e9:.3f} B params; "
          f"files {sorted(os.listdir(dst))}")
    return 0


def make_meta(ref: str, meta: str) -> int:
    with tarfile.open(meta, "w:gz") as tf:
        for f in META_FILES:
            if os.path.exists(os.path.join(ref, f)):
                tf.add(os.path.join(ref, f), arcname=f)
    print(f"{meta}: {os.path.getsize(meta) / 2**20:.2f} MiB")
    return 0


def check(src: str, ref: str) -> int:
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(ref, "config.json")))
    want = {}
    for f in sorted(os.listdir(ref)):
        if f.endswith(".safetensors"):
            want.update(load_file(os.path.join(ref, f)))
    got = dict(tensors(src, bool(cfg.get("tie_word_embeddings"))))
    bad = [k for k in want if k not in got or got[k].shape != want[k].shape or not bool((got[k] == want[k]).all())]
    extra = sorted(set(got) - set(want))
    print(f"{len(want)} tensors in the reference; {len(bad)} differ or are missing {bad[:5]}; extra {extra[:5]}")
    return 1 if bad or extra else 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--meta":
        raise SystemExit(make_meta(a[1], a[2]))
    if a and a[0] == "--check":
        raise SystemExit(check(a[1], a[2]))
    raise SystemExit(convert(a[0], a[1], a[2]))
