#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
r() { name=$1; shift; timeout 200 python3 benchmarks/train_step.py --device cuda --n 100000 --modes none --no-reference --compile --repeats 30 --warmup 3 --out $OUT/train_step_100k_$name "$@" > $OUT/$name.log 2>&1; echo "$name: $(grep '^N ' $OUT/$name.log)"; }
r b013 --memory-budget 0.13
r b014 --memory-budget 0.14
r b013_autotune --memory-budget 0.13 --compile-mode max-autotune-no-cudagraphs
r b013_again --memory-budget 0.13
