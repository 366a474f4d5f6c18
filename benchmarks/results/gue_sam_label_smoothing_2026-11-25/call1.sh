#!/bin/bash
# 2026-11-25 (seventeenth session), call 1: GUE prom_core_all, base preset, seed 0, four arms trained at once on one
# GPU for 7.5 min each: the preset, label smoothing 0.1, sharpness-aware minimization (rho 0.05), and both.
# Run from the repository root on the device with .whl and .bench_data carried (.bench_data/gue/prom_core_all).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
rm -rf /tmp/gw; nvidia-smi -L > $OUT/gpus.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpus.txt
timeout 565 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 7.5 --jobs 4 --work /tmp/gw --shift-average 3 \
  --variant "plain:" --variant "ls10:label_smoothing=0.1" --variant "sam05:sam_rho=0.05" \
  --variant "sam05_ls10:sam_rho=0.05;label_smoothing=0.1" \
  --out $OUT/gue_core_all_sam_ls > $OUT/gue_core_all_sam_ls.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_sam_ls.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test*/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_sam_ls.md; tail -n 6 $OUT/gue_core_all_sam_ls.log
