#!/bin/bash
# On a GPU: the same labeling job through `mcprm label --backend sglang`, then `--backend vllm`, one
# after the other on one GPU: per-step K=8 on the 400 real GSM8K-train solutions (bench/gpu_e2e/solutions400.jsonl),
# the real 1.5B model at /tmp/qwen, critical_path.sh's prompt options. Prints one table line per run from its
# manifest (and writes them to OUTDIR/table.txt); each run's corpus and log are in OUTDIR/{sglang,vllm}[.log].
#   bash bench/gpu_e2e/sglang_label.sh [OUTDIR]      (default $OUT/sglang_label; SL_GPU=N: the GPU, default 0)
# Needs, on the same warm machine: the model (device.sh prep), mcprm at /tmp/mcprm (E2E_SNAP: a snapshot of code
# that registers the sglang backend), vLLM and Ray in /tmp/site (shared/device/README.md), and sglang 0.5.17 in
# /tmp/site_sgl + /tmp/site_sgl_tf (its transformers pin) from bench/sglang_try.sh, one call per part, back to back:
#   run(carry=[".xfer/sglang/01"], command="bash bench/sglang_try.sh stash .xfer/sglang/01")     (02, 03 alike)
#   run(carry=[".xfer/sglang/04"], command="bash bench/sglang_try.sh stash .xfer/sglang/04 && bash bench/sglang_try.sh finish && bash bench/gpu_e2e/sglang_label.sh")
# Both engine starts are cold on a fresh machine (sglang compiles its kernels with nvcc at first use: 122 s in
# bench/sglang_try.sh's run). UNTESTED on a GPU: checked with bash -n only.
set -u
D=${1:-${OUT:-/tmp/out}/sglang_label}; mkdir -p "$D"
SNAP=${E2E_SNAP:-/tmp/mcprm}; M=${E2E_MODEL:-/tmp/qwen}
IN=${SL_INPUT:-$PWD/bench/gpu_e2e/solutions400.jsonl}
SGL=${SGL_SITE:-/tmp/site_sgl}; SGL_TF=${SGL_SITE_TF:-/tmp/site_sgl_tf}
TPL=$'Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}'
export CUDA_VISIBLE_DEVICES=${SL_GPU:-0} VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
[ -d "$SGL/sglang" ] || { echo "sglang_label: no sglang in $SGL (bench/sglang_try.sh stash ... && finish)" >&2; exit 2; }
[ -d "$SNAP/rollouts" ] || { echo "sglang_label: no mcprm at $SNAP (E2E_SNAP)" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader -i "$CUDA_VISIBLE_DEVICES" || true
one() {  # backend, PYTHONPATH: label into $D/backend (from scratch)
  local bk=$1 t0 rc
  rm -rf "${D:?}/$bk"
  t0=$(date +%s.%N)
  (cd "$SNAP" && PYTHONPATH=$2 python3 -m cli.main label --input "$IN" --output "$D/$bk" --backend "$bk" \
      --model "$M" --strategy per-step --k 8 --max-new-tokens 512 --prompt-format chat --prompt-template "$TPL" \
      --max-model-len 4096 --keep-warm 0 --no-progress) > "$D/$bk.log" 2>&1
  rc=$?
  echo "== $bk: exit $rc, $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
  tail -n 3 "$D/$bk.log" | cut -c1-200
}
one sglang "$SGL_TF:$SGL:/tmp/site:$SNAP"  # sglang's own pins first (transformers 5.12.1), then Ray and mcprm
one vllm "/tmp/site:$SNAP"
python3 - "$D" <<'PY' | tee "$D/table.txt"
import json, os, sys
d = sys.argv[1]
print(f"{'backend':8} {'engine start s':>14} {'labeling s':>10} {'tokens':>10} {'gen tok/s':>10} {'lab GPU-s/sol':>13}")
for bk in ("sglang", "vllm"):
    try:
        m = json.load(open(os.path.join(d, bk, "manifest.json")))
    except (OSError, ValueError) as e:
        print(f"{bk:8} no manifest ({e.__class__.__name__}): see {d}/{bk}.log")
        continue
    t, solutions = m["throughput"], m["counts"]["added"]  # a fresh output: every solution labeled by this run
    per = t["labeling_gpu_seconds"] / solutions if t.get("labeling_gpu_seconds") and solutions else None
    cells = (t.get("engine_start_seconds"), t.get("labeling_seconds"), t.get("rollout_tokens"),
             t.get("generated_tokens_per_s"), None if per is None else round(per, 4))
    print(f"{bk:8} " + " ".join(f"{str(c):>{w}}" for c, w in zip(cells, (14, 10, 10, 10, 13))))
PY
