#!/bin/bash
# Session 2026-11-24b, call A: the track benchmark's mixer column (issue 16 item 5): tiny preset, 7 mixers x 3 folds.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p /tmp/tm
nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/gpu.txt
timeout 530 python3 benchmarks/promoter_tracks.py --shared .bench_data --preset tiny --device cuda --windows 8192 \
  --lr 2e-3 --max-minutes 5.5 --validations 8 --no-eukaryotes --parallel 21 --stride 4 --tokens 16384000 \
  --tokens-per-step 8192 --set tolerance_bins=6 --seed 0 \
  --mixers linear,gla,deltanet,gated_deltanet,linformer,fnet,synthesizer --work /tmp/tm/w --out /tmp/tm/track_mixers \
  > /tmp/tm/track.log 2>&1; echo "rc=$?" >> /tmp/tm/track.log
cd /tmp/tm && (ls track_mixers.* track.log; find w -name metrics.jsonl -o -name log.txt -o -name metrics.json -o -name config.json) | tar czf $OUT/track_mixers.tgz -T -
cat /tmp/tm/track_mixers.md; grep -v "^ *$" /tmp/tm/track.log | tail -n 30
