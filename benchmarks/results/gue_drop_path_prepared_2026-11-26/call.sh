#!/bin/bash
# Prepared 2026-11-26 (seventeenth session), not run (no device time was left): GUE prom_core_all, base preset,
# stochastic depth (`model.drop_path`, new this session; off in every preset) against the preset, as
# ../gue_sam_label_smoothing_2026-11-25/call4.sh compared label smoothing: on a two-GPU kind (nvidia-h100-x2), seeds
# 0-2 trained at once on one GPU for 6.8 min, the preset on GPU 0, drop_path 0.1 on GPU 1, each with its three-seed
# ensemble. Decide on dev MCC (runs.tgz: each run's metrics.jsonl), report test. Before the call: copy
# ../shared/data/gue/prom_core_all to .bench_data/gue/prom_core_all; carry .whl and .bench_data.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
rm -rf /tmp/gwa /tmp/gwb; nvidia-smi -L > $OUT/gpus.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpus.txt
common="--gue .bench_data/gue --preset base --device cuda --tasks prom_core_all --max-minutes 6.8 --shift-average 3 --seeds 0,1,2 --jobs 3 --ensemble"
CUDA_VISIBLE_DEVICES=0 timeout 540 python3 benchmarks/gue_promoters.py $common --work /tmp/gwa --variant "plain:" \
  --out $OUT/gue_core_all_plain > $OUT/gue_core_all_plain.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 540 python3 benchmarks/gue_promoters.py $common --work /tmp/gwb \
  --variant "dp10:model.drop_path=0.1" --out $OUT/gue_core_all_dp10 > $OUT/gue_core_all_dp10.log 2>&1
wait
(cd /tmp && tar czf $OUT/runs.tgz gw*/*/metrics.jsonl gw*/*/config.json gw*/*/eval_test*/metrics.json gw*/*ensemble*/metrics.json 2>/dev/null)
tail -n 9 $OUT/*.log
