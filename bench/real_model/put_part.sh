#!/bin/bash
# Device side, one call per part: write .gguf/part.NN at its offset in /tmp/model.gguf (idempotent, so a
# retried call cannot double-append). Parts come from `split -n 20 -d -a 2 model.gguf .gguf/part.` (all but the
# last are 55,866,038 bytes). Usage: bash bench/real_model/put_part.sh NN
set -eu
n=$((10#$1))
python3 - "$n" <<'PY'
import os, sys
n = int(sys.argv[1]); size = 55866038
data = open(f".gguf/part.{n:02d}", "rb").read()
fd = os.open("/tmp/model.gguf", os.O_WRONLY | os.O_CREAT)
os.pwrite(fd, data, n * size); os.close(fd)
print(f"part {n:02d}: {len(data)} bytes at {n * size}; file now {os.path.getsize('/tmp/model.gguf')}")
PY
