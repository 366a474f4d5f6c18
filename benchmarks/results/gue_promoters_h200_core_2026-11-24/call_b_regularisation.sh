#!/bin/bash
# Issue 15: regularisation on GUE prom_core_all (base preset, seed 0): the preset against more dropout / weight decay,
# 3 runs sharing one H200 for 8.7 min each.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 585 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 8.7 --jobs 3 --variant "preset:lr=5e-4" --variant "dropout0.3:model.dropout=0.3" \
  --variant "dropout0.2_wd0.2:model.dropout=0.2;weight_decay=0.2" --work /tmp/gw --out $OUT/gue_base_reg > $OUT/gue_base_reg.log 2>&1; echo "rc=$?" >> $OUT/gue_base_reg.log
(cd /tmp/gw && tar czf $OUT/gue_base_reg_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_base_reg.md; tail -n 6 $OUT/gue_base_reg.log
