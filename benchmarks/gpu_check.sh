#!/usr/bin/env bash
# GPU check of train / predict / evaluate and DDP on a machine with >= 2 CUDA GPUs. Writes logs under $OUT
# (or ./gpu_check). Run from the repository root:  bash benchmarks/gpu_check.sh
set -euo pipefail
OUT=${OUT:-gpu_check}
mkdir -p "$OUT"
W=$(mktemp -d)
G=data/gue/prom_core_tata
E=data/ecoli_k12
{
  nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  echo "== DDP sequence classifier, 2 processes"
  torchrun --nproc-per-node 2 -m genolin train --csv $G/train.csv --val-csv $G/dev.csv --preset small \
    --epochs 3 --device cuda --out "$W/ddp"
  echo "== single GPU track model, evaluate and predict on CUDA"
  python3 -m genolin train --fasta $E/NC_000913.3.fa.bgz --tss $E/gene_starts.bed --preset small --epochs 2 \
    --device cuda --out "$W/track"
  python3 -m genolin evaluate --model "$W/track" --fasta $E/NC_000913.3.fa.bgz --tss $E/gene_starts.bed \
    --device cuda --rc-average --out "$W/track/eval"
  python3 -m genolin predict --model "$W/track" --fasta $E/NC_000913.3.fa.bgz --device cuda --rc-average \
    --out "$W/ecoli"
  wc -l "$W"/ecoli.*
  head -3 "$W/ecoli.plus.bedGraph"
  python3 -m genolin predict --model "$W/ddp" --csv $G/test.csv --device cuda --out "$W/test.tsv"
  python3 -m genolin evaluate --model "$W/ddp" --csv $G/test.csv --device cuda --out "$W/ddp/test"
} 2>&1 | tee "$OUT/gpu_check.log"
cp "$W/ddp/metrics.jsonl" "$OUT/ddp_metrics.jsonl"
cp "$W/track/eval/metrics.json" "$OUT/track_eval_metrics.json"
cp "$W/ddp/test/metrics.json" "$OUT/ddp_test_metrics.json"
