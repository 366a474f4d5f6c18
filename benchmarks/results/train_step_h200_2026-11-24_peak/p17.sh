#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/gpus.txt
timeout 280 python3 benchmarks/train_step.py --device cuda --n 100000 --modes none --no-reference --compile --memory-budget 0.13 --repeats 9 --peak-report --out $OUT/train_step_peak_b013 > $OUT/peak_b013.log 2>&1
tail -n 40 $OUT/peak_b013.log
