#!/bin/bash
# Session 2026-11-24 (8th), call B: the other three GUE promoter tasks, base preset, seed 0, 3 runs at once on one H200; test scored RC-averaged with and without --shift-average 3.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 560 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_notata,prom_core_tata,prom_300_tata --max-minutes 6.2 --jobs 3 --work /tmp/gw --shift-average 3 \
  --out $OUT/gue_other_shift > $OUT/gue_other_shift.log 2>&1; echo "rc=$?" >> $OUT/gue_other_shift.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test*/metrics.json 2>/dev/null)
cat $OUT/gue_other_shift.md; grep "test MCC" $OUT/gue_other_shift.log | grep -v "^genolin"; tail -n 3 $OUT/gue_other_shift.log
