#!/bin/bash
# One device call of the lever benchmark (bench/gpu_levers.py): finish the vLLM install if this warm machine lacks
# it, add FlashInfer if its wheels were carried (.xfer/flashinfer, bench/prepare_flashinfer_wheels.sh), then run
# the levers; the table goes to stdout and $OUT/levers_table.txt, every row to $OUT/levers.jsonl.
#   bash bench/gpu_levers.sh [CHUNKDIR] [gpu_levers.py options...]     e.g. bash bench/gpu_levers.sh .xfer/02 --levers A
set -u
t_call=$(date +%s)
if [ $# -gt 0 ] && [ -d "$1" ]; then chunk=$1; shift; else chunk=""; fi
if [ ! -d /tmp/site/vllm ]; then
  [ -n "$chunk" ] || { echo "vLLM is not installed on this machine: pass the last vLLM chunk folder first" >&2; exit 3; }
  # shellcheck source=bench/gpu_setup.sh
  source bench/gpu_setup.sh "$chunk" || { echo "setup failed"; exit 3; }
else
  # the same environment as bench/gpu_setup.sh's: without VLLM_USE_FLASHINFER_SAMPLER=0 every engine that mcprm's
  # Ray workers start dies importing flashinfer (the raw levers' children set it themselves)
  export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0} PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0
fi
if [ -d .xfer/flashinfer ] && [ ! -d /tmp/site/flashinfer ]; then bash bench/prepare_flashinfer_wheels.sh install; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
# the levers get what is left of this call's ${LEVERS_CALL_S:-560} s after the installs (a later --deadline-s wins)
left=$(( ${LEVERS_CALL_S:-560} - ($(date +%s) - t_call) ))
python3 bench/gpu_levers.py --out "$OUT" --deadline-s "$left" "$@" | tee "$OUT/levers_stdout.txt"
python3 bench/gpu_levers.py table --out "$OUT" > "$OUT/levers_table.txt"
tail -c 6000 "$OUT/levers.log" 2>/dev/null | grep -i "error\|Traceback" | tail -5
