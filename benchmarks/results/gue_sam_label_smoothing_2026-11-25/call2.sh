#!/bin/bash
# 2026-11-25 (seventeenth session), call 2: GUE prom_core_all, base preset, four runs at once on one GPU for 7.5 min
# each, as call 1: label smoothing 0.1 at seeds 0, 1, 2 with their ensemble, beside label smoothing 0.2 at seed 0
# (two benchmark processes side by side). Run from the repository root with .whl and .bench_data carried.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
rm -rf /tmp/gw /tmp/gw2; nvidia-smi -L > $OUT/gpus.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpus.txt
common="--gue .bench_data/gue --preset base --device cuda --tasks prom_core_all --max-minutes 7.5 --shift-average 3"
timeout 565 python3 benchmarks/gue_promoters.py $common --seeds 0,1,2 --jobs 3 --work /tmp/gw --ensemble \
  --variant "ls10:label_smoothing=0.1" --out $OUT/gue_core_all_ls10_3seeds > $OUT/gue_core_all_ls10_3seeds.log 2>&1 &
sleep 20  # the second process's k-mer regression after the first's
timeout 545 python3 benchmarks/gue_promoters.py $common --seeds 0 --jobs 1 --work /tmp/gw2 \
  --variant "ls20:label_smoothing=0.2" --out $OUT/gue_core_all_ls20 > $OUT/gue_core_all_ls20.log 2>&1
wait
(cd /tmp && tar czf $OUT/runs.tgz gw*/*/metrics.jsonl gw*/*/config.json gw*/*/eval_test*/metrics.json gw*/*ensemble*/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_ls10_3seeds.md $OUT/gue_core_all_ls20.md; tail -n 3 $OUT/*.log
