#!/bin/bash
# Session 2026-11-25 (11th), issue 15: GUE prom_core_all, base preset with weight averaging (ema_decay 0.9995),
# seeds 0-3 trained at once on one H200 (7.0 min each; a first call with --max-minutes 7.8 ran out of the 10-minute call before the ensemble was scored), test scored RC-averaged and with --shift-average 3;
# the ensemble of the four.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=3
nvidia-smi -L > $OUT/gpus.txt
timeout 585 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1,2,3 \
  --tasks prom_core_all --max-minutes 7.0 --jobs 4 --work /tmp/gw --shift-average 3 --ensemble --set ema_decay=0.9995 \
  --out $OUT/gue_core_all_4seeds_ema > $OUT/gue_core_all_4seeds_ema.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_4seeds_ema.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test*/metrics.json */*ensemble*/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_4seeds_ema.md; tail -n 12 $OUT/gue_core_all_4seeds_ema.log
