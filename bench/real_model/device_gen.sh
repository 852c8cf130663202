#!/bin/bash
# Device side, the last call: write the last part, check the GGUF's sha256, install the carried `gguf` wheel,
# unpack the tokenizer, and generate 2 responses per problem into $OUT/responses.jsonl (log in $OUT/log).
# Carry: .gguf/part.19 and .xfer (gguf-*.whl, tok.tar.xz).
set -eu
bash bench/real_model/put_part.sh 19
echo "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046  /tmp/model.gguf" | sha256sum -c -
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .xfer/extra/gguf-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p /tmp/tokx && tar -xJf .xfer/extra/tok.tar.xz -C /tmp/tokx
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
set -o pipefail
python3 bench/real_model/generate.py --model-dir /tmp --gguf model.gguf --tok /tmp/tokx/tok \
    --out "$OUT/responses.jsonl" "$@" 2>&1 | grep -v -E 'it/s\]|s/it\]' | tee "$OUT/log"
