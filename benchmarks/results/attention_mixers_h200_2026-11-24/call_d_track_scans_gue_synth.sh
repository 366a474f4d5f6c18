#!/bin/bash
# Session 2026-11-24b, call D: track benchmark, the three scan mixers alone (2000 steps wanted), beside GUE seeds 1,2 of
# the synthesizer (small preset).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p /tmp/tm
(timeout 480 python3 benchmarks/gue_promoters.py --gue .bench_data/gue --preset small --device cuda --seeds 1,2 \
  --max-minutes 5 --jobs 8 --mixers synthesizer --work /tmp/gw --out $OUT/gue_synth_s12 > $OUT/gue_synth_s12.log 2>&1; echo "rc=$?" >> $OUT/gue_synth_s12.log) &
timeout 560 python3 benchmarks/promoter_tracks.py --shared .bench_data --preset tiny --device cuda --windows 8192 \
  --lr 2e-3 --max-minutes 8.3 --validations 8 --no-eukaryotes --parallel 9 --stride 4 --tokens 16384000 \
  --tokens-per-step 8192 --set tolerance_bins=6 --seed 0 \
  --mixers gla,deltanet,gated_deltanet --work /tmp/tm/w --out /tmp/tm/track_scans \
  > /tmp/tm/track.log 2>&1; echo "rc=$?" >> /tmp/tm/track.log
wait
cd /tmp/tm && (ls track_scans.* track.log; find w -name metrics.jsonl -o -name log.txt -o -name metrics.json -o -name config.json) | tar czf $OUT/track_scans.tgz -T -
(cd /tmp/gw && tar czf $OUT/gue_synth_runs.tgz */metrics.jsonl */config.json */eval_test/metrics.json 2>/dev/null)
cat /tmp/tm/track_scans.md; grep -v "^ *$" /tmp/tm/track.log | tail -n 12; cat $OUT/gue_synth_s12.md
