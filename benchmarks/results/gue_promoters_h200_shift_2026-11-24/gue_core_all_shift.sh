#!/bin/bash
# Session 2026-11-24 (8th): GUE prom_core_all, base preset, seeds 0-2 at once on one H200; test scored plain (RC) and with --shift-average 3; ensemble of the seeds.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 580 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1,2 \
  --tasks prom_core_all --max-minutes 6.4 --jobs 3 --work /tmp/gw --shift-average 3 --ensemble \
  --out $OUT/gue_core_all_shift > $OUT/gue_core_all_shift.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_shift.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test*/metrics.json */*ensemble*/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_shift.md; tail -n 12 $OUT/gue_core_all_shift.log
