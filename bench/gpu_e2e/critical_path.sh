#!/bin/bash
# Device side: the default strategy's GPU-seconds against per-step K=8 on the same 400 real
# GSM8K-train solutions (bench/gpu_e2e/solutions400.jsonl: samples 0-3 of the first 100 training problems, from
# the e2e `gen` stage), the real 1.5B model at /tmp/qwen (bench/gpu_e2e/device.sh prep), one GPU.
#   bash bench/gpu_e2e/critical_path.sh RUN...     RUN = name:options (e.g. ps:"--strategy per-step --k 8")
# CP_INPUT=FILE labels another input; CP_RUN_S caps each run's seconds (default 280).
# Each run labels into /tmp/cp/NAME (from scratch) and appends one JSON line to $OUT/critical_path.jsonl with the
# manifest's throughput (startup, labeling seconds, tokens, GPU-seconds per solution) and the command's wall time.
# The first run on a fresh machine is the cold start; later ones find vLLM's compile cache warm.
# CP_PARALLEL=N (a machine with N GPUs): one Ray head with N GPUs, the runs at once, each with one worker (one GPU)
# through --ray-address auto and its own compile cache (/tmp/cc_NAME: each run's start is a cold one).
# One run at a time, the GPU's busy fraction is sampled (nvidia-smi's utilisation, every 0.5 s) and averaged over
# the labeling window (the run's last labeling_seconds), and the engine's own stats lines (running and waiting
# requests, KV cache use) are read from its log: the lever table's columns (BENCHMARKS.md). top's per-process %CPU
# (5 s intervals) gives the CPU side: the engine core at 100% is a host-bound engine; the sum is the busy cores.
# CP_PYSPY=SECONDS (py-spy from .xfer/extra): where the engine core's and the worker's Python time goes.
set -u
OUT=${OUT:-/tmp/out}; export OUT; mkdir -p "$OUT" /tmp/cp
SNAP=${E2E_SNAP:-/tmp/mcprm}
export PATH=/tmp/site/bin:$PATH PYTHONPATH=/tmp/site:$SNAP VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
M=${E2E_MODEL:-/tmp/qwen}
IN=${CP_INPUT:-$PWD/bench/gpu_e2e/solutions400.jsonl}
TPL=$'Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}'
PAR=${CP_PARALLEL:-0}
if [ "$PAR" -gt 0 ]; then
  ray start --head --num-gpus "$PAR" --disable-usage-stats > "$OUT/ray_start.log" 2>&1 || { cat "$OUT/ray_start.log"; exit 1; }
fi
descendants() { local p; for p in $(ps -o pid= --ppid "$1" 2> /dev/null); do echo "$p"; descendants "$p"; done; }
# CP_PYSPY=SECONDS: once the run is labeling (its first progress line), py-spy samples the engine core and the
# labeling worker (this run's own descendants, by their process titles) for that long, without stopping them;
# the row gets each one's busiest functions (bench/gpu_e2e/README.md, "Label speed")
spy() {
  local lp=$1 name=$2 i p c
  for i in $(seq 600); do
    grep -q '^\[mcprm\] [0-9,]*/' "$OUT/cp_$name.log" 2> /dev/null && break
    kill -0 "$lp" 2> /dev/null || return 0
    sleep 1
  done
  for p in $(descendants "$lp"); do
    c=$(cat "/proc/$p/comm" 2> /dev/null) || continue
    case $c in
      VLLM::EngineCor*|ray::ShardActor*|ray::FleetActor*)
        py-spy record --nonblocking -d "$CP_PYSPY" -r 50 -f raw -o "/tmp/cp/$name.spy.${c//[^A-Za-z]/}.$p" \
          -p "$p" > /dev/null 2>&1 & ;;
    esac
  done
  wait
}
one() {
  local spec=$1 name opts par=()
  name=${spec%%:*}; opts=${spec#*:}
  [ "$PAR" -gt 0 ] && par=(--ray-address auto --num-workers 1 --compile-cache "/tmp/cc_$name")
  rm -rf /tmp/cp/$name
  local smi=""
  if [ "$PAR" -eq 0 ] && command -v nvidia-smi > /dev/null; then
    ( while :; do echo "$(date +%s.%N) $(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -n 1)"; sleep 0.5; done ) > "/tmp/cp/$name.smi" 2>/dev/null &
    smi=$!
  fi
  # where the machine's CPU goes (the engine core's one thread, the workers, the graders): top's per-process
  # %CPU over each 5 s interval, with a timestamp line before each, read over the labeling window below
  local tops=""
  if [ "$PAR" -eq 0 ] && command -v top > /dev/null; then
    ( while :; do echo "@ $(date +%s.%N)"; top -b -n 2 -d 5 -w 200 | awk '/^top -/{n++} n==2'; done ) > "/tmp/cp/$name.top" 2>/dev/null &
    tops=$!
  fi
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  # each run time-boxed (CP_RUN_S, default 280 s) so that one slow run cannot take a call's other runs with it;
  # the progress lines stay in its log, so a run cut short still says how far it got and at what rate
  (cd "$SNAP" && exec timeout -s INT -k 20 "${CP_RUN_S:-280}" python3 -m cli.main label --input "$IN" \
      --output /tmp/cp/$name --backend vllm --model "$M" --prompt-format chat --prompt-template "$TPL" \
      --max-new-tokens 512 --max-model-len 4096 "${par[@]}" $opts) > "$OUT/cp_$name.log" 2>&1 &
  local lp=$! sp=""
  if [ -n "${CP_PYSPY:-}" ] && [ "$PAR" -eq 0 ]; then
    if command -v py-spy > /dev/null; then spy "$lp" "$name" & sp=$!
    else echo "CP_PYSPY: py-spy is not on PATH (data_run.sh setup links it from .xfer/extra); no samples" >&2; fi
  fi
  wait "$lp"; rc=$?
  [ -n "$sp" ] && wait "$sp"
  t1=$(date +%s.%N)
  [ -n "$smi" ] && kill "$smi" 2> /dev/null
  [ -n "$tops" ] && { pkill -P "$tops" 2> /dev/null; kill "$tops" 2> /dev/null; }
  grep -v '^\[mcprm\]' "$OUT/cp_$name.log" | tail -n 3 | cut -c1-200
  (cd "$SNAP" && python3 - "$name" "$opts" "$rc" "$t0" "$t1" <<'PY')
import json, sys
name, opts, rc, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
row = {"run": name, "options": opts, "rc": rc, "wall_s": round(t1 - t0, 1)}
try:
    m = json.load(open(f"/tmp/cp/{name}/manifest.json"))
    t = m["throughput"]
    row.update({k: t.get(k) for k in ("startup_seconds", "labeling_seconds", "seconds", "rollouts", "rollout_tokens",
                                      "gpus", "gpu_seconds", "labeling_gpu_seconds", "gpu_seconds_per_solution",
                                      "generated_tokens_per_s")})
    row["workers"] = t.get("workers")
    row["engine_demand"] = t.get("engine_demand")
    row["drawn_ahead_dropped"] = m.get("counts", {}).get("drawn_ahead_dropped")
    from pipeline.corpus import read_corpus
    rows = read_corpus(f"/tmp/cp/{name}", columns=["id", "first_error", "rollouts"]).to_pylist()
    row["first_error"] = {r["id"]: r["first_error"] for r in rows}
    lab = t.get("labeling_seconds") or 0
    try:
        u = [float(b) for a, b in (x.split() for x in open(f"/tmp/cp/{name}.smi") if len(x.split()) == 2)
             if t1 - lab <= float(a) <= t1]
        row["gpu_busy"] = round(sum(u) / len(u) / 100, 3) if u else None
    except OSError:
        row["gpu_busy"] = None
    try:  # mean %CPU by process name over the labeling window (100 = one core), and the machine's busy cores
        import collections
        by, n, t = collections.defaultdict(float), 0, None
        for x in open(f"/tmp/cp/{name}.top"):
            f = x.split()
            if x.startswith("@ "):
                t = float(f[1])
                n += t1 - lab <= t <= t1
            elif t is not None and t1 - lab <= t <= t1 and len(f) >= 12 and f[0].isdigit():
                by[" ".join(f[11:])] += float(f[8])
        if n:
            top = sorted(by.items(), key=lambda kv: -kv[1])
            row["cpu_pct_by_process"] = {k: round(v / n, 1) for k, v in top[:12]}
            row["cpu_cores_busy"] = round(sum(by.values()) / n / 100, 2)
    except (OSError, ValueError):
        pass
except Exception as e:  # noqa: BLE001
    row["error"] = repr(e)
import glob
for f in sorted(glob.glob(f"/tmp/cp/{name}.spy.*")):  # py-spy's collapsed stacks: "frame;frame;... count"
    leaf, incl, total = {}, {}, 0
    for ln in open(f, errors="replace"):
        stack, _, n = ln.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        n, frames = int(n), stack.split(";")
        total += n
        leaf[frames[-1]] = leaf.get(frames[-1], 0) + n
        for fr in set(frames):
            incl[fr] = incl.get(fr, 0) + n
    if total:
        def top(d):
            return [[k[:160], round(v / total, 3)] for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:15]]
        row.setdefault("pyspy", {})[f.split(".spy.")[1]] = {"samples": total, "self": top(leaf), "inclusive": top(incl)}
import re
run = wait = kv = None
for ln in open(f"{__import__('os').environ['OUT']}/cp_{name}.log", errors="replace"):
    m = re.search(r"Running: (\d+) reqs, Waiting: (\d+) reqs.*?KV cache usage: ([\d.]+)%", ln)
    if m:
        run = max(run or 0, int(m[1])); wait = max(wait or 0, int(m[2])); kv = max(kv or 0.0, float(m[3]))
row.update(max_running=run, max_waiting=wait, max_kv_pct=kv)
# with --verbose (Ray forwards the engines' own log lines): each engine's KV cache as vLLM sized it, its
# preemptions (a cache too small for the running sequences recomputes them), its CUDA graph capture and whether
# its compiled graphs were loaded or compiled again
kv_tokens, preempt, graphs, compiled = [], 0, 0, []
for ln in open(f"{__import__('os').environ['OUT']}/cp_{name}.log", errors="replace"):
    m = re.search(r"GPU KV cache size: ([\d,]+) tokens", ln)
    if m:
        kv_tokens.append(int(m[1].replace(",", "")))
    m = re.search(r"Preemptions: (\d+)", ln)
    if m:
        preempt = max(preempt, int(m[1]))
    graphs += "Graph capturing finished" in ln
    if "Directly load AOT compilation" in ln or "Compiling model again" in ln:
        compiled.append("loaded" if "Directly load" in ln else "compiled again")
if kv_tokens or preempt or graphs or compiled:
    row.update(engine_kv_cache_tokens=kv_tokens, engine_preemptions=preempt, engine_graph_captures=graphs,
               engine_compile_cache=compiled)
with open(f"{__import__('os').environ['OUT']}/critical_path.jsonl", "a") as f:
    f.write(json.dumps(row) + "\n")
print(json.dumps({k: v for k, v in row.items() if k != "first_error"}))  # the call's output: the rates only
PY
}
if [ "$PAR" -gt 0 ]; then
  for spec in "$@"; do one "$spec" & done
  wait
  ray stop --force > /dev/null 2>&1
else
  for spec in "$@"; do one "$spec"; done
fi
