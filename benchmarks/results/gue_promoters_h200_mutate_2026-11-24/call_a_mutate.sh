#!/bin/bash
# Session 2026-11-24 (7th), call A: GUE prom_core_all, base, seed 0: plain vs random base substitutions
# (mutate_prob 0.02, 0.05), 3 runs at once on one H200, 7.5 min each.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 560 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all --max-minutes 7.5 --jobs 3 --work /tmp/gw --variant "plain:mutate_prob=0" \
  --variant "mut02:mutate_prob=0.02" --variant "mut05:mutate_prob=0.05" --out $OUT/gue_core_all_mutate > $OUT/gue_core_all_mutate.log 2>&1; echo "rc=$?" >> $OUT/gue_core_all_mutate.log
(cd /tmp/gw && tar czf $OUT/runs.tgz */metrics.jsonl */config.json 2>/dev/null)
cat $OUT/gue_core_all_mutate.md; tail -n 4 $OUT/gue_core_all_mutate.log
