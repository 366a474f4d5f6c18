#!/bin/bash
# Session 2026-11-24b, call H: GUE base preset, synthesizer, seeds 1 and 2, 8 runs sharing the H200.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
timeout 515 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset base --device cuda --seeds 1,2 \
  --max-minutes 7.3 --jobs 8 --mixers synthesizer --work /tmp/gw --out $OUT/gue_base_synth_s12 > $OUT/gue_base_synth_s12.log 2>&1; echo "rc=$?" >> $OUT/gue_base_synth_s12.log
(cd /tmp/gw && tar czf $OUT/gue_base_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat $OUT/gue_base_synth_s12.md; tail -n 12 $OUT/gue_base_synth_s12.log
