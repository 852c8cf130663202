"""Turn the Qwen2.5-Coder-1.5B-Instruct GGUF into a bf16 safetensors folder vLLM and transformers load.

    python bench/gpu_e2e/convert.py /tmp/model.gguf /tmp/qwen

Dequantizes the GGUF (Q4_K_M) with transformers + gguf, saves the weights in bf16 and the tokenizer (with its chat
template) beside them. See /work/shared/device/REAL-MODEL.md.
"""

from __future__ import annotations

import os
import sys
import time


def main(src: str, dst: str) -> int:
    import torch
    import transformers as t

    t0 = time.time()
    d, f = os.path.split(src)
    kw = {}
    try:  # transformers 5 keeps GGUF weights packed unless asked to unpack them
        kw["quantization_config"] = t.GgufConfig(gguf_file=f, dequantize=True)
    except AttributeError:
        pass
    m = t.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.bfloat16, **kw)
    c = m.config
    if hasattr(c, "quantization_config"):
        del c.quantization_config
    m2 = t.AutoModelForCausalLM.from_config(c, dtype=torch.bfloat16)
    missing, unexpected = m2.load_state_dict(m.state_dict(), strict=False)
    print(f"missing {missing}, unexpected {unexpected}")
    m2.save_pretrained(dst)
    tok = t.AutoTokenizer.from_pretrained(d, gguf_file=f)
    tok.save_pretrained(dst)
    print(f"converted in {time.time() - t0:.1f}s: {type(m2).__name__}, "
          f"{sum(p.numel() for p in m2.parameters()) / 1e9:.3f} B params, chat template "
          f"{'yes' if getattr(tok, 'chat_template', None) else 'NO'}; files {sorted(os.listdir(dst))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
