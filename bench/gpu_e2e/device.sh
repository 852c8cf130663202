#!/bin/bash
# Device side of the real end-to-end run on one GPU (label, train, score, best-of-N). Runs the named stages in order;
# a stage that finished on this warm machine (/tmp/e2e/done.STAGE) is skipped, so a call cut off by its time
# limit goes on in the next call. Logs and timings go to $OUT (times.jsonl: one line per stage, wall seconds).
#   bash bench/gpu_e2e/device.sh prep gen label_r150 ...      (see bench/gpu_e2e/README.md)
# prep needs the model parts already written by bench/real_model/put_part.sh (all but the last, which it writes)
# and carries .gguf/part.19 and .xfer/extra (gguf, latex2sympy2_extended, antlr4 wheels).
set -u
W=${E2E_WORK:-/tmp/e2e}; mkdir -p "$W"
# shellcheck source=bench/gpu_e2e/env.sh
. "$PWD/bench/gpu_e2e/env.sh"
P=${E2E_PROBLEMS:-$PWD/bench/gpu_e2e}
LABEL_OPTS=(--backend "$BK" --model "$M" --prompt-format "$PF" --prompt-template "$TPL" --max-new-tokens 512
            --no-progress ${E2E_LABEL_EXTRA:---max-model-len 4096})

stage() {  # name, command...
  local s=$1; shift
  if [ -e "$W/done.$s" ]; then echo "== $s: done before"; return 0; fi
  echo "== $s: start $(date -u +%T)"
  local t0; t0=$(date +%s.%N)
  ( "$@" ) > "$OUT/$s.log" 2>&1
  local rc=$?
  local t1; t1=$(date +%s.%N)
  local dt; dt=$(python3 -c "print(round($t1-$t0,1))")
  echo "{\"stage\": \"$s\", \"rc\": $rc, \"wall_s\": $dt}" | tee -a "$OUT/times.jsonl" >> "$W/times.jsonl"
  tail -n 4 "$OUT/$s.log" | cut -c1-300
  if [ $rc -ne 0 ]; then echo "== $s FAILED rc=$rc"; tail -n 40 "$OUT/$s.log"; exit $rc; fi
  touch "$W/done.$s"
}

do_prep() {
  set -e
  bash bench/real_model/put_part.sh 19
  echo "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046  /tmp/model.gguf" | sha256sum -c -
  if [ -d .xfer/mcprm_snap ]; then rm -rf "$SNAP" && cp -r .xfer/mcprm_snap "$SNAP"; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .xfer/extra/*.whl
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 $D/convert.py /tmp/model.gguf "$M"
}
do_restore() {  # a second machine: the generated and labeled data of an earlier call (a tgz put in /tmp)
  set -e
  tar -xzf "${E2E_DATA:-/tmp/e2e_data.tgz}" -C "$W"
  rm -rf "$W/prm" "$W/scored" "$W/bestofn.json"
  for s in gen label_r150 label_nr150 label_all; do touch "$W/done.$s"; done
  ls "$W"
}
do_gen() {
  mc generate -i $P/problems_all.jsonl -o $W/gen.jsonl --n 8 --backend "$BK" --model "$M" --prompt-format "$PF" \
     --prompt-template "$TPL" --temperature 0.7 --top-p 0.95 --max-new-tokens ${E2E_GEN_TOKENS:-512} --seed 0
  python3 $D/split.py $W/gen.jsonl $P/problems_train.jsonl $P/problems_heldout.jsonl $W/train_sols.jsonl \
     $W/heldout8.jsonl
}
do_label_r150() { mc label --input $W/train_sols.jsonl --output $W/corpus --limit ${E2E_CMP_N:-150} "${LABEL_OPTS[@]}"; }
do_label_nr150() {
  mc label --input $W/train_sols.jsonl --output $W/corpus_noreuse --limit ${E2E_CMP_N:-150} --no-reuse-rollouts "${LABEL_OPTS[@]}"
}
do_label_all() { mc label --input $W/train_sols.jsonl --output $W/corpus "${LABEL_OPTS[@]}"; }
do_train() {
  mc train $W/corpus --output $W/prm --base-model "$M" --batch-size 8 --grad-accum 2 --max-length 1024 \
     --no-progress --overwrite ${E2E_TRAIN_EXTRA:-}
}
do_score() {
  mc score $W/prm --input $W/heldout8.jsonl --output $W/scored --batch-size 128 --device "$DEV"
}
do_bestofn() {
  mc bestofn $W/scored --json > $W/bestofn.json
  cat $W/bestofn.json
  mc bestofn $W/scored
}
do_human() {  # label quality against people: ProcessBench-MATH dev part (a quarter held aside), docs/human-labels.md
  set -e
  local common; common=$(python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "${LABEL_OPTS[@]}")
  (cd "$SNAP" && python3 bench/bench_human_labels.py ${E2E_HUMAN_SET:-/work/shared/data/processbench_math_dev.jsonl.gz} \
     $W/human --part dev --gpus ${E2E_HUMAN_GPUS:-0} --common "$common" ${E2E_HUMAN_CONFIGS:---config per-step-k8:"--strategy per-step --k 8" \
     --config defaults: --config no-tail-fill:"--tail-fill 0"} | tee "$OUT/human_table.md")
  cp $W/human/dev/results.jsonl "$OUT/human_results.jsonl"
}
do_summary() {
  (cd "$SNAP" && python3 $D/summarize.py $W "$OUT/results.json")
  cp $W/prm/mcprm_card.json "$OUT/" 2>/dev/null || true
}

for s in "$@"; do stage "$s" "do_$s"; done
echo "== all done $(date -u +%T)"
