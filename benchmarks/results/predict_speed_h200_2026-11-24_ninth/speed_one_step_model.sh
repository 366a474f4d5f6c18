#!/bin/bash
# Session 2026-11-24 (9th), call F: genome prediction speed, base model, 102 Mbp, compiled, bf16 weights + norm_conv
# kernel; training windows vs --window-bp 32768.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/gpus.txt
timeout 280 python3 benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --compile --formats none,bedgraph \
  --no-reference --work /tmp/ps --out $OUT/predict_speed_h200_100mbp_compile > $OUT/ps.log 2>&1; echo "rc=$?" >> $OUT/ps.log
grep -E "^(rc|CLI)" $OUT/ps.log
timeout 250 python3 benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --compile --formats none,bedgraph \
  --no-reference --work /tmp/ps --window-bp 32768 --out $OUT/predict_speed_h200_100mbp_compile_w32k > $OUT/ps32.log 2>&1; echo "rc=$?" >> $OUT/ps32.log
grep -E "^(rc|CLI)" $OUT/ps32.log
