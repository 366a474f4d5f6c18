#!/bin/bash
# 2026-11-25 (seventeenth session), call 3: GUE prom_core_all, base preset, six runs at once on one GPU for 7.5 min:
# the preset and label smoothing 0.1, seeds 0-2 each, each row's ensemble and the ensemble of all six.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
rm -rf /tmp/gw; nvidia-smi -L > $OUT/gpus.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpus.txt
timeout 570 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1,2 \
  --tasks prom_core_all --max-minutes 7.5 --jobs 6 --work /tmp/gw --shift-average 3 --ensemble --ensemble-rows \
  --variant "plain:" --variant "ls10:label_smoothing=0.1" \
  --out $OUT/gue_core_all_six > $OUT/gue_core_all_six.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_six.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json */eval_test*/metrics.json */*ensemble*/metrics.json 2>/dev/null)
cat $OUT/gue_core_all_six.md; tail -n 3 $OUT/gue_core_all_six.log
