#!/bin/bash
# Session 2026-11-24 (6th), call B: GUE prom_core_all, base preset, seed 0: preset and lighter masked-token terms (prob 0.05; weight 0.2; weight 0.5 with lr 1e-3); 4 runs per H200.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=3
nvidia-smi -L > $OUT/gpus.txt
timeout 575 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 8.2 --jobs 4 --work /tmp/gw --variant "mlm0.5p0.05:mlm_weight=0.5;mlm_prob=0.05" \
  --variant "mlm0.2:mlm_weight=0.2" --variant "mlm0.5lr1e-3:mlm_weight=0.5;lr=1e-3" --mixers synthesizer \
  --out $OUT/gue_core_all_mlm_b > $OUT/gue_core_all_mlm_b.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_mlm_b.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_mlm_b.md; tail -n 4 $OUT/gue_core_all_mlm_b.log
