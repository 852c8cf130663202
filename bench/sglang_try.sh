#!/bin/bash
# Try SGLang on the lent GPU machine (no network, torch 2.11.0+cu130, Python 3.12).
#
# sglang 0.5.23 pins torch==2.14.1 (and its sglang-kernel 0.4.10 links libtorch 2.14.1), so it cannot use the
# image's torch; sglang 0.5.17 is the newest release that pins torch==2.11.0 (with sglang-kernel 0.4.5, built for
# torch 2.11 + CUDA 13). This script carries 0.5.17 over, the way shared/device/README.md carries vLLM:
#
#   on the CPU machine, in the checkout's root (PyPI reachable; ~10 min, mostly xz -9 on 2 cores):
#     bash bench/sglang_try.sh prepare [--chunk-mib N]   -> .xfer/sglang/01 .. NN (git-ignored), prints the calls
#   on the device, one call per chunk, back to back (the machine keeps /tmp only while warm, 30 s):
#     bash bench/sglang_try.sh stash .xfer/sglang/NN     append a chunk to /tmp/sgl_stash
#     bash bench/sglang_try.sh finish                    check sha256, unpack, pip install into /tmp/site_sgl
#                                                        (transformers 5.12.1 + tokenizers 0.22.2, sglang's pins,
#                                                        into /tmp/site_sgl_tf)
#     bash bench/sglang_try.sh run [--vllm | --vllm-only] [--model /tmp/qwen] [--prompts 256] [--k 8]
#                                  [--max-tokens 128] [--attention fa3|triton|flashinfer] [--dummy]
#                                                        the offline benchmark: the same token-id requests through
#                                                        sglang.Engine, and with --vllm (after it) or --vllm-only
#                                                        through vllm.LLM (PYTHONPATH=/tmp/site, the vLLM recipe's
#                                                        install), each in its own process; prints generated
#                                                        tokens/s, writes $OUT/{sglang,vllm}_try.{json,log}
#                                                        (SGL_IMAGE_TRANSFORMERS=1: the image's transformers;
#                                                        --dummy: random weights of the 1.5B shape, no /tmp/qwen)
# UNTESTED on a GPU until the lead's run (2026-11-27).
set -euo pipefail

STASH=${SGL_STASH:-/tmp/sgl_stash}
SITE=${SGL_SITE:-/tmp/site_sgl}
SITE_TF=${SGL_SITE_TF:-/tmp/site_sgl_tf}
X=.xfer/sglang

# ---- exact pins (what the image lacks on sglang 0.5.17's offline path; see docs/gpus.md "SGLang") ----
# Found by a static import closure of sglang.srt.entrypoints.engine, the scheduler, tokenizer/detokenizer
# managers, model runner, qwen2, the fa3/triton attention backends and the sampler, with is_cuda true:
# module-level imports outside try/except. The image already has torch 2.11, triton, numpy, pillow,
# aiohttp, einops, filelock, huggingface_hub, jinja2, psutil, regex, requests, safetensors, sentencepiece,
# torchvision, tqdm, uvloop, pyyaml, nvidia-ml-py (pynvml), anyio, httpx, h11, click, pygments, annotated-doc.
MAIN_WHEELS="
sglang==0.5.17
sglang-kernel==0.4.5
flashinfer-python==0.6.15.post1
apache-tvm-ffi==0.1.11
xgrammar==0.2.1
compressed-tensors==0.20.0
loguru==0.7.3
gguf==0.19.0
orjson==3.13.0
uvicorn==0.54.0
openai==2.6.1
jiter==0.16.0
distro==1.9.0
sniffio==1.3.1
pydantic==2.13.4
pydantic_core==2.46.4
annotated-types==0.8.0
typing-inspection==0.4.2
fastapi==0.136.3
starlette==1.3.1
msgspec==0.21.1
pyzmq==27.1.0
pybase64==1.4.3
setproctitle==1.3.7
partial-json-parser==0.2.1.1.post7
dill==0.4.1
ipython==9.18.1
ipython-pygments-lexers==1.1.1
jedi==0.20.1
parso==0.8.7
matplotlib-inline==0.2.2
traitlets==5.16.1
pexpect==4.9.0
ptyprocess==0.7.0
prompt_toolkit==3.0.53
wcwidth==0.9.4
stack_data==0.6.3
asttokens==3.0.2
executing==2.3.0
pure_eval==0.2.4
"
# sglang 0.5.17 pins transformers==5.12.1, which wants tokenizers<=0.23.0 (the image has 5.17.0 / 0.23.2):
# installed apart, so that dropping /tmp/site_sgl_tf from PYTHONPATH falls back to the image's.
TF_WHEELS="
transformers==5.12.1
tokenizers==0.22.2
"

prepare() {
  local chunk_mib=""
  while [ $# -gt 0 ]; do
    case "$1" in --chunk-mib) chunk_mib=$2; shift ;; *) echo "unknown argument $1" >&2; exit 2 ;; esac
    shift
  done
  local root; root=$(git rev-parse --show-toplevel); cd "$root"
  git check-ignore -q "$X/x" || { echo "$X is not ignored by git; add /.xfer/ to .git/info/exclude" >&2; exit 3; }
  local py=${PYTHON:-python3}
  local plat="--python-version 3.12 --implementation cp"
  for n in 28 27 26 24 17 31 34 35; do plat="$plat --platform manylinux_2_${n}_x86_64"; done
  plat="$plat --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
  mkdir -p $X/cache
  echo "== downloading $(echo $MAIN_WHEELS $TF_WHEELS | wc -w) wheels into $X/cache"
  # shellcheck disable=SC2086
  $py -m pip download -q --no-deps --only-binary=:all: $plat -d $X/cache $MAIN_WHEELS $TF_WHEELS
  rm -rf $X/stored $X/bundle.tar.xz && mkdir -p $X/stored/main $X/stored/tf
  local spec name ver pat f
  for group in main tf; do
    local list=$MAIN_WHEELS; [ $group = tf ] && list=$TF_WHEELS
    for spec in $list; do
      name=${spec%%==*}; ver=${spec##*==}; pat=$(echo "$name" | tr '-' '_')
      f=$(ls $X/cache/ | grep -i "^${pat}-${ver}-.*\.whl$" | head -1)
      [ -n "$f" ] || { echo "wheel for $spec not found in $X/cache" >&2; exit 4; }
      echo "$X/cache/$f $X/stored/$group"
    done
  done > $X/list.txt
  echo "== rewriting the wheels uncompressed (xz then sees the raw CUDA binaries)"
  $py - "$X/list.txt" <<'PYEOF'
import csv, io, os, sys, zipfile
# dropped: a static library never loaded at run time (as in the vLLM recipe)
DROP = {"xgrammar-": ["xgrammar/lib/libxgrammar.a"]}
tot = 0
for line in open(sys.argv[1]):
    src, out = line.split()
    base = os.path.basename(src)
    prefixes = [p for k, v in DROP.items() if base.startswith(k) for p in v]
    zin = zipfile.ZipFile(src)
    drop = {n for n in zin.namelist() if any(n.startswith(p) for p in prefixes)}
    rec = [n for n in zin.namelist() if n.endswith(".dist-info/RECORD")][0]
    dst = os.path.join(out, base)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = zin.read(info.filename)
            if info.filename == rec:
                rows = [r for r in csv.reader(io.StringIO(data.decode())) if r and r[0] not in drop]
                s = io.StringIO(); csv.writer(s, lineterminator="\n").writerows(rows); data = s.getvalue().encode()
            zi = zipfile.ZipInfo(info.filename, info.date_time); zi.external_attr = info.external_attr
            zout.writestr(zi, data)
    tot += os.path.getsize(dst)
print(f"   {tot / 2**20:.0f} MiB uncompressed")
PYEOF
  echo "== tar | xz -9 (minutes: sglang-kernel's flash_ops.abi3.so alone is 1.1 GB)"
  local t0; t0=$(date +%s)
  tar -C $X/stored -cf - main tf | nice -n 10 xz -9 -T0 -c > $X/bundle.tar.xz
  local bytes; bytes=$(stat -c %s $X/bundle.tar.xz)
  rm -rf $X/stored
  echo "   $((bytes / 1048576)) MiB in $(( $(date +%s) - t0 )) s"
  if [ -z "$chunk_mib" ]; then
    local tree
    tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    chunk_mib=$(( (64 * 1048576 - tree) / 1048576 - 4 ))
    [ "$chunk_mib" -gt 60 ] && chunk_mib=60
    echo "== the tree that travels with every call: $((tree / 1048576)) MiB -> chunks of $chunk_mib MiB"
  fi
  rm -rf $X/[0-9][0-9]
  split -b "${chunk_mib}M" -d -a 2 --numeric-suffixes=1 $X/bundle.tar.xz $X/bundle.part.
  local nparts sha p i
  nparts=$(ls $X/bundle.part.* | wc -l)
  sha=$(sha256sum $X/bundle.tar.xz | cut -d' ' -f1)
  for p in $X/bundle.part.*; do
    i=${p##*.}; mkdir -p $X/$i; mv "$p" $X/$i/
    printf 'parts=%s\nsha256=%s\nbytes=%s\n' "$nparts" "$sha" "$bytes" > $X/$i/MANIFEST
  done
  rm -f $X/bundle.tar.xz
  echo
  echo "== $nparts chunk folders under $X/. Device calls, one right after the other:"
  for i in $(seq -f '%02g' 1 "$nparts"); do
    if [ "$i" = "$(printf %02d "$nparts")" ]; then
      echo "  run(carry=[\"$X/$i\"], command=\"bash bench/sglang_try.sh stash $X/$i && bash bench/sglang_try.sh finish && bash bench/sglang_try.sh run --vllm\")"
    else
      echo "  run(carry=[\"$X/$i\"], command=\"bash bench/sglang_try.sh stash $X/$i\")"
    fi
  done
}

stash() {
  mkdir -p "$STASH"
  local d
  for d in "$@"; do
    [ -d "$d" ] || { echo "sglang_try: no chunk folder '$d' here (was it named in carry?)" >&2; exit 2; }
    cp -f "$d"/bundle.part.* "$d"/MANIFEST "$STASH"/
  done
  echo "sglang_try: stash holds: $(cd "$STASH" && ls bundle.part.* | tr '\n' ' ')"
}

finish() {
  local t0; t0=$(date +%s)
  cd "$STASH"
  [ -f MANIFEST ] || { echo "sglang_try: MANIFEST missing: no chunk was stashed" >&2; exit 3; }
  local nparts want got missing="" i
  nparts=$(sed -n 's/^parts=//p' MANIFEST); want=$(sed -n 's/^sha256=//p' MANIFEST)
  for i in $(seq -f '%02g' 1 "$nparts"); do [ -f "bundle.part.$i" ] || missing="$missing $i"; done
  if [ -n "$missing" ]; then
    echo "sglang_try: parts missing:$missing -- the machine went back between calls; start again from 01" >&2
    exit 4
  fi
  # shellcheck disable=SC2046
  got=$(cat $(seq -f 'bundle.part.%02g' 1 "$nparts") | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "sglang_try: sha256 mismatch ($got != $want)" >&2; exit 5; }
  rm -rf whl && mkdir whl
  # shellcheck disable=SC2046
  cat $(seq -f 'bundle.part.%02g' 1 "$nparts") | xz -d -T0 | tar -x -C whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" whl/main/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_TF" whl/tf/*.whl
  echo "sglang_try: installed $(ls whl/main | wc -l)+$(ls whl/tf | wc -l) wheels in $(( $(date +%s) - t0 )) s" \
       "($(du -sm "$SITE" | cut -f1) MiB in $SITE)"
  # shellcheck disable=SC2046
  rm -rf whl $(seq -f 'bundle.part.%02g' 1 "$nparts")
}

bench_py() {
  # the benchmark program, written to a file so that sglang's spawned processes can re-import __main__ safely
  cat > "$1" <<'PYEOF'
"""The same offline job through sglang.Engine or vllm.LLM: P prompts of token ids (G groups sharing a prefix,
like one solution's step prefixes), K samples each, fixed length (ignore_eos), so both engines generate
exactly P*K*T tokens. Prints and writes load seconds and generated tokens/s (best of the timed runs)."""
import argparse
import json
import random
import time


def make_prompts(n, groups, prefix_len, suffix_len, seed=0):
    rng = random.Random(seed)
    # ids 1000..150000: ordinary tokens of the Qwen2 vocabulary (special tokens start at 151643)
    pre = [[rng.randrange(1000, 150000) for _ in range(prefix_len)] for _ in range(groups)]
    out = [pre[i % groups] + [rng.randrange(1000, 150000) for _ in range(suffix_len)] for i in range(n)]
    return sorted(out, key=lambda p: pre.index(p[:prefix_len]))  # a group's prompts adjacent


def dummy_model(path):
    """A Qwen2.5-1.5B-shaped config (28 layers, hidden 1536, 12/2 heads, MLP 8960, vocab 151936) for random
    weights: the same compute per token as the real model, no weights or tokenizer to carry."""
    import transformers
    c = transformers.Qwen2Config(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                 num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                 max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=True,
                                 rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645)
    c.architectures = ["Qwen2ForCausalLM"]
    c.dtype = "bfloat16"
    c.save_pretrained(path)
    return path


def run_sglang(a, prompts):
    import sglang as sgl
    extra = {"attention_backend": a.attention} if a.attention else {}
    if a.dummy:
        extra.update(load_format="dummy", skip_tokenizer_init=True)
    t0 = time.time()
    eng = sgl.Engine(model_path=a.model, dtype="bfloat16", mem_fraction_static=a.mem, context_length=a.max_len,
                     sampling_backend="pytorch", log_level="warning", random_seed=0, **extra)
    load = time.time() - t0
    sp = {"max_new_tokens": a.max_tokens, "temperature": 1.0, "top_p": 1.0, "ignore_eos": True}
    ids = [p for p in prompts for _ in range(a.k)]  # K independent samples of each prompt, adjacent
    eng.generate(input_ids=ids[: 4 * a.k], sampling_params=dict(sp, max_new_tokens=16))  # warm-up
    runs = []
    for _ in range(a.repeats):
        t = time.time()
        outs = eng.generate(input_ids=ids, sampling_params=sp)
        dt = time.time() - t
        gen = sum(o["meta_info"]["completion_tokens"] for o in outs)
        cached = sum(o["meta_info"].get("cached_tokens", 0) for o in outs)
        runs.append({"seconds": round(dt, 3), "generated_tokens": gen, "gen_tok_s": round(gen / dt),
                     "cached_prompt_tokens": cached})
    eng.shutdown()
    return load, runs


def run_vllm(a, prompts):
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    extra = {"load_format": "dummy", "skip_tokenizer_init": True} if a.dummy else {}
    t0 = time.time()
    llm = LLM(model=a.model, dtype="bfloat16", gpu_memory_utilization=a.mem, max_model_len=a.max_len,
              enable_prefix_caching=True, seed=0, **extra)
    load = time.time() - t0
    detok = not a.dummy
    sp = SamplingParams(n=a.k, max_tokens=a.max_tokens, temperature=1.0, top_p=1.0, ignore_eos=True,
                        detokenize=detok)
    reqs = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    llm.generate(reqs[:4], SamplingParams(n=a.k, max_tokens=16, ignore_eos=True, detokenize=detok),
                 use_tqdm=False)  # warm-up
    runs = []
    for _ in range(a.repeats):
        t = time.time()
        outs = llm.generate(reqs, sp, use_tqdm=False)
        dt = time.time() - t
        gen = sum(len(c.token_ids) for o in outs for c in o.outputs)
        runs.append({"seconds": round(dt, 3), "generated_tokens": gen, "gen_tok_s": round(gen / dt)})
    return load, runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["sglang", "vllm"], required=True)
    ap.add_argument("--model", default="/tmp/qwen")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--prefix-len", type=int, default=200)
    ap.add_argument("--suffix-len", type=int, default=100)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--mem", type=float, default=0.85)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--attention", default="", help="sglang attention backend (default: sglang's: fa3 on Hopper)")
    ap.add_argument("--dummy", action="store_true",
                    help="random weights of a Qwen2.5-1.5B-shaped config written to /tmp/qwen15_dummy (no model or "
                         "tokenizer needed; sampling never reads the tokenizer with ignore_eos)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.dummy:
        a.model = dummy_model("/tmp/qwen15_dummy")
    prompts = make_prompts(a.prompts, a.groups, a.prefix_len, a.suffix_len)
    t0 = time.time()
    load, runs = (run_sglang if a.engine == "sglang" else run_vllm)(a, prompts)
    res = {"engine": a.engine, "model": a.model, "dummy_weights": a.dummy, "prompts": a.prompts, "k": a.k, "max_tokens": a.max_tokens,
           "prompt_tokens_each": a.prefix_len + a.suffix_len, "load_seconds": round(load, 1),
           "total_seconds": round(time.time() - t0, 1), "runs": runs,
           "best_gen_tok_s": max(r["gen_tok_s"] for r in runs)}
    print(json.dumps(res))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
PYEOF
}

run() {
  local out=${OUT:-/tmp/sgl_out}; mkdir -p "$out"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1
  local with_vllm=0 with_sgl=1 args=() a
  for a in "$@"; do
    case "$a" in --vllm) with_vllm=1 ;; --vllm-only) with_vllm=1; with_sgl=0 ;; *) args+=("$a") ;; esac
  done
  # sglang's own transformers pin (5.12.1) first; SGL_IMAGE_TRANSFORMERS=1 uses the image's 5.17 instead
  local sgl_path="$SITE_TF:$SITE"
  [ "${SGL_IMAGE_TRANSFORMERS:-0}" = 1 ] && sgl_path="$SITE"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  bench_py /tmp/sgl_try.py
  set +e
  local rc=0
  if [ $with_sgl = 1 ]; then
  ( export PYTHONPATH="$sgl_path"; cd /tmp && python3 -c "import sglang, sgl_kernel, flashinfer, transformers, torch
print('sglang', sglang.__version__, 'sgl_kernel', sgl_kernel.__version__, 'flashinfer', flashinfer.__version__,
      'transformers', transformers.__version__, 'torch', torch.__version__)" )
  ( export PYTHONPATH="$sgl_path"; cd /tmp && python3 /tmp/sgl_try.py --engine sglang \
      --out "$out/sglang_try.json" "${args[@]}" ) 2>&1 | tee "$out/sglang_try.log" | tail -n 80
  rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
    echo "sglang_try: the sglang run failed (exit $rc); its whole log is $out/sglang_try.log" >&2
    return "$rc"
  fi
  fi
  if [ $with_vllm = 1 ]; then
    ( export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0; cd /tmp && python3 /tmp/sgl_try.py --engine vllm \
        --out "$out/vllm_try.json" "${args[@]}" ) 2>&1 | tee "$out/vllm_try.log" | tail -n 30
    rc=${PIPESTATUS[0]}
  fi
  return $rc
}

cmd=${1:-}; shift || true
case "$cmd" in
  prepare) prepare "$@" ;;
  stash) stash "$@" ;;
  finish) finish ;;
  run) run "$@" ;;
  *) sed -n 2,24p "$0"; exit 2 ;;
esac
