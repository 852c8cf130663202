#!/bin/bash
# On a GPU: a second `mcprm label` on the same machine. Run on a fresh machine (empty compile caches): the first
# run starts its engine cold and keeps its worker warm (--keep-warm 10m, no --ray-address); the second, the same
# command into another output, borrows it; then `mcprm fleet down --fleet local` and a third run with
# --keep-warm 0 (warm caches, its own engine) for comparison. No Ray head of our own: the runs start this
# machine's Ray themselves.
#   bash bench/gpu_e2e/warm_start.sh        (after device.sh prep and the vLLM stash install; WS_GPU=N, default 0)
# Each run appends a JSON line to $OUT/warm_start.jsonl (manifest throughput + execution, command wall time).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/ws
SNAP=${E2E_SNAP:-/tmp/mcprm}; M=${E2E_MODEL:-/tmp/qwen}
export CUDA_VISIBLE_DEVICES=${WS_GPU:-0} PYTHONPATH=/tmp/site:$SNAP VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
unset RAY_ADDRESS
IN=${WS_INPUT:-$PWD/bench/gpu_e2e/solutions400.jsonl}
LIMIT=${WS_LIMIT:-100}
TPL=$'Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}'
mc() { (cd "$SNAP" && python3 -m cli.main "$@"); }
run() {  # name, extra options
  local name=$1; shift
  rm -rf /tmp/ws/$name
  local a; a=$(date +%s.%N)
  mc label --input "$IN" --limit "$LIMIT" --output /tmp/ws/$name --backend vllm --model "$M" --max-model-len 4096 \
     --prompt-format chat --prompt-template "$TPL" --max-new-tokens 512 --no-progress "$@" > "$OUT/ws_$name.log" 2>&1
  local rc=$? b; b=$(date +%s.%N)
  tail -n 4 "$OUT/ws_$name.log" | cut -c1-240
  (cd "$SNAP" && python3 - "$name" "$rc" "$a" "$b" <<'PY') | tee -a "$OUT/warm_start.jsonl"
import json, sys
name, rc, a, b = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
row = {"run": name, "rc": rc, "wall_s": round(b - a, 1)}
try:
    m = json.load(open(f"/tmp/ws/{name}/manifest.json"))
    t = m["throughput"]
    row.update({k: t.get(k) for k in ("startup_seconds", "engine_start_seconds", "input_seconds", "labeling_seconds",
                                      "seconds", "rollout_tokens", "gpu_seconds_per_solution", "startup_events")})
    row["execution"] = m.get("execution")
except Exception as e:  # noqa: BLE001
    row["error"] = repr(e)
print(json.dumps(row, default=str))
PY
}
run cold --keep-warm 10m   # the engine starts (cold caches), and stays warm after the run
run warm --keep-warm 10m   # the same command again: borrows it
mc fleet status > "$OUT/ws_status.log" 2>&1; cat "$OUT/ws_status.log" | cut -c1-200
mc fleet down --fleet local > "$OUT/ws_down.log" 2>&1
run own --keep-warm 0      # warm caches, its own engine
cp ~/.cache/mcprm/local-ray/keeper.log "$OUT/ws_keeper.log" 2>/dev/null
echo "== done $(date -u +%T)"
