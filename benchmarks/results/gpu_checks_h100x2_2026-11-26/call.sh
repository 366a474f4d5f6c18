#!/bin/bash
# 2026-11-26 (seventeenth session) on nvidia-h100-x2: the two-GPU prediction test on code not run on GPUs before
# (rank 0 calling both strands' promoters, 15dd37b; the review mend 273ed0a), the other GPU tests but fla's, and
# DDP training with sharpness-aware minimization and gradient accumulation on two GPUs. Carry .whl.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $OUT/machine.txt 2>&1
rm -rf /tmp/ddp_sam
timeout 200 python3 -m pytest -v -p no:cacheprovider tests/test_gpu.py -k "two_gpus" > $OUT/gpu_tests_two_gpus.log 2>&1
echo "rc=$?" >> $OUT/gpu_tests_two_gpus.log
timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin train \
  --csv data/gue/prom_core_tata/train.csv --val-csv data/gue/prom_core_tata/dev.csv --preset small --epochs 2 \
  --set sam_rho=0.05 --set grad_accum=2 --device cuda --out /tmp/ddp_sam > $OUT/ddp_sam.log 2>&1
echo "rc=$?" >> $OUT/ddp_sam.log; cp /tmp/ddp_sam/metrics.jsonl $OUT/ddp_sam_metrics.jsonl 2>/dev/null
CUDA_VISIBLE_DEVICES=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "not fla and not two_gpus and not gla and not deltanet" > $OUT/gpu_tests_rest.log 2>&1
echo "rc=$?" >> $OUT/gpu_tests_rest.log
tail -n 5 $OUT/*.log
