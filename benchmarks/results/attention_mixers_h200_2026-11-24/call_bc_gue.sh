#!/bin/bash
# Session 2026-11-24b, calls B/C: the GUE benchmark's mixer column (issue 16 item 5): small preset, 7 mixers, 1 seed.
# usage: gpu20b.sh TASKS NAME
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/gpu.txt
timeout 555 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --tasks $1 --preset small --device cuda --seeds 0 \
  --max-minutes 5 --jobs 14 --mixers deltanet,linear,gla,gated_deltanet,linformer,fnet,synthesizer \
  --work /tmp/gw --out $OUT/$2 > $OUT/$2.log 2>&1; echo "rc=$?" >> $OUT/$2.log
(cd /tmp/gw && tar czf $OUT/$2_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/$2.md; tail -n 20 $OUT/$2.log
