#!/bin/bash
# Session 2026-11-25 (12th), call C: GUE prom_core_all, a diverse ensemble: base preset (ema 0.9995) with the dense
# synthesizer (seeds 0, 1) and with linformer (seeds 0, 1), four runs at once, then the ensemble of all four.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH OMP_NUM_THREADS=2
timeout 575 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1 \
  --tasks prom_core_all --max-minutes 6.8 --jobs 4 --shift-average 3 --ensemble-rows --set ema_decay=0.9995 \
  --mixers synthesizer,linformer --work /tmp/g --out $OUT/gue_core_all_diverse > $OUT/gue_core_all_diverse.log 2>&1
echo "rc=$?" >> $OUT/gue_core_all_diverse.log
(cd /tmp/g && tar czf $OUT/runs.tgz $(find . -name metrics.jsonl -o -name metrics.json -o -name config.json))
tail -n 12 $OUT/gue_core_all_diverse.log
