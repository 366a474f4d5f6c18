#!/bin/bash
# Prepared 2026-11-25 (12th session) for the next: GUE prom_core_all with a wider base model (training steps are
# launch-bound at 2,240 tokens per step, so d_model 512 should cost little time) and compiled blocks (fewer launches).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH OMP_NUM_THREADS=2
timeout 575 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 7.0 --jobs 4 --shift-average 3 --set ema_decay=0.9995 \
  --variant "control:" --variant "d512:model.d_model=512" --variant "d512_l8:model.d_model=512;model.n_layers=8" \
  --variant "compiled:compile=true" --work /tmp/g --out $OUT/gue_core_all_wider > $OUT/gue_core_all_wider.log 2>&1
echo "rc=$?" >> $OUT/gue_core_all_wider.log
(cd /tmp/g && tar czf $OUT/runs.tgz $(find . -name metrics.jsonl -o -name metrics.json -o -name config.json))
tail -n 12 $OUT/gue_core_all_wider.log
