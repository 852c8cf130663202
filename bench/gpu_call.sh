#!/bin/bash
# One device call: finish the vLLM install, then run the GPU benchmark parts named in $@ (see gpu_bench.py).
# Usage on the device: bash bench/gpu_call.sh .xfer/02 [gpu_bench.py all options...]
chunk=$1; shift
source bench/gpu_setup.sh "$chunk" || { echo "setup failed"; exit 3; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
python3 -c "import vllm, ray; print('vllm', vllm.__version__, 'ray', ray.__version__)" | tee -a "$OUT/gpus.txt"
python3 bench/gpu_bench.py all --out "$OUT" "$@"
