#!/usr/bin/env bash
# One GPU: train/evaluate both tasks with the fused kernels (backend auto) and, for comparison, with the reference
# backend forced through GENOLIN_ATTENTION_BACKEND=reference. Logs under $OUT (or ./gpu_train_check).
set -euo pipefail
OUT=${OUT:-gpu_train_check}
mkdir -p "$OUT"
W=$(mktemp -d)
G=data/gue/prom_core_tata
E=data/ecoli_k12
for backend in auto reference; do
  export GENOLIN_ATTENTION_BACKEND=$backend
  echo "== backend $backend"
  s=$(date +%s)
  python3 -m genolin train --csv $G/train.csv --val-csv $G/dev.csv --preset small --epochs 3 --device cuda \
    --out "$W/seq_$backend" 2>&1 | grep -E "epoch|done"
  python3 -m genolin evaluate --model "$W/seq_$backend" --csv $G/test.csv --device cuda --out "$W/seq_$backend/test"
  python3 -m genolin train --fasta $E/NC_000913.3.fa.bgz --tss $E/gene_starts.bed --preset small --epochs 2 \
    --device cuda --out "$W/track_$backend" 2>&1 | grep -E "epoch|done"
  echo "backend $backend: $(( $(date +%s) - s )) s"
done 2>&1 | tee "$OUT/gpu_train_check.log"
