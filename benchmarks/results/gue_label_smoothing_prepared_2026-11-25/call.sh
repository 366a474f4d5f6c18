#!/bin/bash
# Prepared 2026-11-25 (sixteenth session), not run: GUE prom_core_all, base, seed 0: the preset against label
# smoothing 0.05 and 0.1 (`label_smoothing`, new this session), 3 runs at once on one GPU, 7.5 min each, as
# ../gue_promoters_h200_mutate_2026-11-24/call_a_mutate.sh ran its arms. Before the call: copy
# ../shared/data/gue/prom_core_all (train/dev/test.csv) to .bench_data/gue/prom_core_all; carry .whl and .bench_data.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 560 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 7.5 --jobs 3 --work /tmp/gw --variant "plain:label_smoothing=0" \
  --variant "ls05:label_smoothing=0.05" --variant "ls10:label_smoothing=0.1" --out $OUT/gue_core_all_ls > $OUT/gue_core_all_ls.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_ls.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json 2>/dev/null)
cat $OUT/gue_core_all_ls.md; tail -n 4 $OUT/gue_core_all_ls.log
