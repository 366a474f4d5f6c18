#!/bin/bash
# Session 2026-11-24 (5th), call F: GUE prom_core_all, base preset, seeds 0 and 1 at once (2 runs per H200, 8.7 min) and their ensemble.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 580 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1 \
  --tasks prom_core_all --max-minutes 8.7 --jobs 2 --work /tmp/gw --ensemble --out $OUT/gue_core_all_2jobs_ens > $OUT/gue_core_all_2jobs_ens.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_2jobs_ens.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_2jobs_ens.md; tail -n 4 $OUT/gue_core_all_2jobs_ens.log
