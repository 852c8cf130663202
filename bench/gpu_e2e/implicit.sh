#!/bin/bash
# Device side: the implicit PRM (`mcprm train --kind implicit`, the default kind now,
# with --weight-by-confidence, float32) from the real 1.5B model on the e2e corpus (300 labeled GSM8K-train
# solutions, bench/gpu_e2e/README.md), scored on the 800 held-out solutions and measured by best-of-8.
#   bash bench/gpu_e2e/implicit.sh TAG "train options"      (after device.sh prep restore)
# Writes $OUT/imp_TAG.{train.log,card.json,bestofn.json,bestofn.txt,times.json}; the PRM's checkpoints are
# removed after training (the device disk holds about two).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=${E2E_WORK:-/tmp/e2e}; SNAP=${E2E_SNAP:-/tmp/mcprm}; M=${E2E_MODEL:-/tmp/qwen}
export PYTHONPATH=/tmp/site:$SNAP PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
tag=$1; opts=${2:-}
mc() { (cd "$SNAP" && python3 -m cli.main "$@"); }
now() { date +%s.%N; }
rm -rf "$W/prm_$tag" "$W/scored_$tag"
t0=$(now)
# shellcheck disable=SC2086
mc train "$W/corpus" --output "$W/prm_$tag" --base-model "$M" --batch-size 4 --grad-accum 4 --max-length 1024 \
   --no-progress --overwrite $opts > "$OUT/imp_$tag.train.log" 2>&1 || { tail -40 "$OUT/imp_$tag.train.log"; exit 1; }
t1=$(now)
tail -n 4 "$OUT/imp_$tag.train.log"
rm -rf "$W/prm_$tag/checkpoints"
cp "$W/prm_$tag/mcprm_card.json" "$OUT/imp_$tag.card.json"
mc score "$W/prm_$tag" --input "$W/heldout8.jsonl" --output "$W/scored_$tag" --batch-size 64 --device cuda \
   > "$OUT/imp_$tag.score.log" 2>&1 || { tail -40 "$OUT/imp_$tag.score.log"; exit 1; }
t2=$(now)
tail -n 2 "$OUT/imp_$tag.score.log"
mc bestofn "$W/scored_$tag" --json > "$OUT/imp_$tag.bestofn.json"
mc bestofn "$W/scored_$tag" | tee "$OUT/imp_$tag.bestofn.txt"
python3 -c "import json,sys; print(json.dumps({'tag': sys.argv[1], 'options': sys.argv[2], 'train_s': round(float(sys.argv[4])-float(sys.argv[3]),1), 'score_s': round(float(sys.argv[5])-float(sys.argv[4]),1)}))" \
   "$tag" "$opts" "$t0" "$t1" "$t2" | tee "$OUT/imp_$tag.times.json"
