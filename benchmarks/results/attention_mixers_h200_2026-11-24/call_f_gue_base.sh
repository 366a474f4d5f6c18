#!/bin/bash
# Session 2026-11-24b, call F: GUE base preset, synthesizer against deltanet, 4 tasks, seed 0, 8 runs sharing the H200.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
timeout 560 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 0 \
  --max-minutes 7.8 --jobs 8 --mixers synthesizer,deltanet --work /tmp/gw --out $OUT/gue_base_synth > $OUT/gue_base_synth.log 2>&1; echo "rc=$?" >> $OUT/gue_base_synth.log
(cd /tmp/gw && tar czf $OUT/gue_base_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_base_synth.md; tail -n 12 $OUT/gue_base_synth.log
