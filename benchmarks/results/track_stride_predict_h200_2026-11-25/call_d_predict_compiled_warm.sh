#!/bin/bash
# Session 2026-11-25 (12th), call D (same machine as B, inductor cache warm from B): compiled prediction again.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
W=/tmp/w; ls $W > $OUT/w.txt; mkdir -p /tmp/r2; T0=$(date +%s)
PS="python3 benchmarks/predict_speed.py --device cuda --mbp 100 --no-reference --window-bp 32768 --work $W --compile --formats bedgraph"
timeout 170 $PS --model $W/run_s4 --out /tmp/r2/ps_s4_compiled_warm > /tmp/r2/s4.log 2>&1; echo "s4 compiled warm rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/r2/steps.txt
timeout 170 $PS --model $W/run_s2 --out /tmp/r2/ps_s2_compiled_warm > /tmp/r2/s2.log 2>&1; echo "s2 compiled warm rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/r2/steps.txt
(cd /tmp/r2 && tar czf $OUT/call_d.tgz .)
cat /tmp/r2/steps.txt; grep -h "^| \(yes\|no\)" /tmp/r2/*.md
