#!/bin/bash
# Device side, on a GPU: a warm fleet serves refreshes with no engine start (the real 1.5B model,
# vLLM, one GPU). Starts a local Ray head, `mcprm fleet up` (one vLLM worker, the defaults' engine options), then
# labels the same input N times through `--fleet default` and once without (its own worker) for comparison.
#   bash bench/gpu_e2e/fleet.sh [N]            (after device.sh prep and the vLLM stash install)
# Each run appends a JSON line to $OUT/fleet_gpu.jsonl (manifest throughput + execution, command wall time).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/fl
SNAP=${E2E_SNAP:-/tmp/mcprm}; M=${E2E_MODEL:-/tmp/qwen}; N=${1:-2}
export PYTHONPATH=/tmp/site:$SNAP VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
IN=${FL_INPUT:-$PWD/bench/gpu_e2e/solutions400.jsonl}
LIMIT=${FL_LIMIT:-100}
TPL=$'Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}'
ENG=(--backend vllm --model "$M" --max-model-len 4096)
mc() { (cd "$SNAP" && python3 -m cli.main "$@"); }
ray start --head --num-cpus 8 --num-gpus 1 --disable-usage-stats > "$OUT/ray_start.log" 2>&1 || { cat "$OUT/ray_start.log"; exit 1; }
t0=$(date +%s.%N)
mc fleet up --ray-address auto "${ENG[@]}" --keep-warm 30m > "$OUT/fleet_up.log" 2>&1; rc=$?
t1=$(date +%s.%N)
tail -n 5 "$OUT/fleet_up.log"
echo "{\"run\": \"fleet_up\", \"rc\": $rc, \"wall_s\": $(python3 -c "print(round($t1-$t0,1))")}" | tee -a "$OUT/fleet_gpu.jsonl"
run() {  # name, extra options
  local name=$1; shift
  rm -rf /tmp/fl/$name
  local a; a=$(date +%s.%N)
  mc label --input "$IN" --limit "$LIMIT" --output /tmp/fl/$name --ray-address auto "${ENG[@]}" --prompt-format chat \
     --prompt-template "$TPL" --max-new-tokens 512 --no-progress "$@" > "$OUT/fl_$name.log" 2>&1
  local rc=$? b; b=$(date +%s.%N)
  tail -n 3 "$OUT/fl_$name.log" | cut -c1-200
  (cd "$SNAP" && python3 - "$name" "$rc" "$a" "$b" <<'PY') | tee -a "$OUT/fleet_gpu.jsonl"
import json, sys
name, rc, a, b = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
row = {"run": name, "rc": rc, "wall_s": round(b - a, 1)}
try:
    m = json.load(open(f"/tmp/fl/{name}/manifest.json"))
    t = m["throughput"]
    row.update({k: t.get(k) for k in ("startup_seconds", "engine_start_seconds", "labeling_seconds", "seconds",
                                      "rollout_tokens", "gpu_seconds_per_solution")})
    row["execution"] = m.get("execution")
except Exception as e:  # noqa: BLE001
    row["error"] = repr(e)
print(json.dumps(row, default=str))
PY
}
for i in $(seq 1 "$N"); do run "fleet$i" --fleet default; done
mc fleet down --ray-address auto > "$OUT/fleet_down.log" 2>&1
run own   # its own worker (engine start in the run), on the same warm machine
ray stop --force > /dev/null 2>&1
echo "== done $(date -u +%T)"
