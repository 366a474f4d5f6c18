#!/bin/bash
# Session 2026-11-25 (12th), call E (same machine as B and D; the runs of call B in /tmp/w): eager passes again.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
W=/tmp/w; PS="python3 benchmarks/predict_speed.py --device cuda --mbp 100 --no-reference --window-bp 32768 --work $W --formats bedgraph"
mkdir -p /tmp/r3
for i in 1 2; do timeout 80 $PS --model $W/run_s4 --out /tmp/r3/ps_s4_eager_pass$i > /tmp/r3/s4_$i.log 2>&1; echo "s4 eager pass $i rc=$?"; done
timeout 70 $PS --model $W/run_s2 --out /tmp/r3/ps_s2_eager_pass2 > /tmp/r3/s2_2.log 2>&1; echo "s2 eager rc=$?"
(cd /tmp/r3 && tar czf $OUT/call_e.tgz .); grep -H "^| \(yes\|no\)" /tmp/r3/*.md
