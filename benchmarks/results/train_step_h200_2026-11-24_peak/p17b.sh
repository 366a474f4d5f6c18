#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for b in 0.13 0.15 0.17 0.2; do
timeout 100 python3 benchmarks/train_step.py --device cuda --n 100000 --modes none --no-reference --compile --memory-budget $b --repeats 15 --warmup 3 --peak-report --out $OUT/train_step_100k_b$b > $OUT/peak_b$b.log 2>&1
grep "^N \|allocated before" $OUT/peak_b$b.log
done
timeout 100 python3 benchmarks/train_step.py --device cuda --n 100000 --modes none --no-reference --compile --memory-budget 0.13 --repeats 15 --warmup 3 --out $OUT/train_step_100k_b0.13_again > $OUT/again.log 2>&1; grep "^N " $OUT/again.log
