#!/bin/bash
# Issue 15: GUE base preset (synthesizer) on the two core tasks with more GPU per run: 2 runs sharing one H200, 8.7 min.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 585 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --tasks prom_core_all,prom_core_notata --max-minutes 8.7 --jobs 2 --work /tmp/gw --out $OUT/gue_base_2jobs > $OUT/gue_base_2jobs.log 2>&1; echo "rc=$?" >> $OUT/gue_base_2jobs.log
(cd /tmp/gw && tar czf $OUT/gue_base_2jobs_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_base_2jobs.md; tail -n 6 $OUT/gue_base_2jobs.log
