#!/bin/bash
# Session 2026-11-24b, call G: causal kernels (genolin fla path forward only, fla's chunk_linear_attn, the reference) at 16 K-1 M.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 420 python3 benchmarks/attention_kernels.py --only "causal,triton elu" --out $OUT/kernels_causal > $OUT/causal.log 2>&1; echo "rc=$?" >> $OUT/causal.log
cat $OUT/kernels_causal.md; tail -n 5 $OUT/causal.log
