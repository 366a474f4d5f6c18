#!/bin/bash
# Issue 15: GUE prom_core_notata, base preset, seeds 0-2 as 3 runs sharing one H200 for 7.3 min each.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
nvidia-smi -L > $OUT/gpus.txt
timeout 520 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0,1,2 \
  --tasks prom_core_notata --max-minutes 7.3 --jobs 3 --work /tmp/gw --out $OUT/gue_base_notata_3seeds > $OUT/gue_base_notata_3seeds.log 2>&1; echo "rc=$?" >> $OUT/gue_base_notata_3seeds.log
(cd /tmp/gw && tar czf $OUT/gue_base_notata_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_base_notata_3seeds.md; tail -n 4 $OUT/gue_base_notata_3seeds.log
