#!/bin/bash
# Session 2026-11-24 (9th), call G: in-process prediction profile (warm-up first, so no compiling in the timings),
# base model, 40 Mbp, RC: eager/compiled x float32/bf16 weights, and --window-bp 32768.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
P="python3 benchmarks/predict_profile.py --preset base --device cuda --mbp 40 --profile-batches 2 --work /tmp/pp"
run() { name=$1; shift; timeout 150 $P "$@" --out $OUT/pp_$name > $OUT/pp_$name.log 2>&1; echo "== $name rc=$?"; grep -E "^(plan|model|pipeline|predict|writes)" $OUT/pp_$name.log; }
run eager_fp32 --no-bf16-weights
run eager_bf16
run compiled_fp32 --compile --no-bf16-weights
run compiled_bf16 --compile
run compiled_bf16_w32k --compile --window-bp 32768
