#!/bin/bash
# Session 2026-11-24 (5th), call C: GUE prom_core_all, base, seed 0: plain vs weight averaging (3 runs on one H200).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 540 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 7.5 --jobs 3 --work /tmp/gw --variant "plain:ema_decay=0" \
  --variant "ema999:ema_decay=0.999" --variant "ema9995:ema_decay=0.9995" --out $OUT/gue_core_all_ema > $OUT/gue_core_all_ema.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_ema.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json */best.safetensors 2>/dev/null)
cat $OUT/gue_core_all_ema.md; tail -n 4 $OUT/gue_core_all_ema.log
