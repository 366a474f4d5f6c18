#!/bin/bash
# Session 2026-11-25 (11th), issue 14: the norm_conv graph-break fix on one H200. The new no-graph-break test
# against the previous norm_conv.py (expected to fail) and the current one; the genome batch's forward; then
# predict_speed twice over a fresh inductor cache (the first pass compiles every shape, the second finds them).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $OUT/machine.txt
W=/tmp/w; mkdir -p $W; T0=$(date +%s)
cp genolin/ops/norm_conv.py $W/new_nc.py; cp .bench_data/old/norm_conv_8c6a612.py genolin/ops/norm_conv.py  # (from git show 8c6a612:genolin/ops/norm_conv.py)
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_norm_conv.py -k one_graph > $OUT/tests.log 2>&1
echo "old norm_conv.py: rc=$?" >> $OUT/tests.log
cp $W/new_nc.py genolin/ops/norm_conv.py
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_norm_conv.py tests/test_triton.py >> $OUT/tests.log 2>&1
echo "new: rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/tests.log
timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run \
  > $W/train.log 2>&1
echo "train rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/tests.log
timeout 100 python3 benchmarks/encoder_forward.py --device cuda --batch 128 --no-plain --profile-rows 30 \
  --variant "half_compiled:bf16=1;compile=1" --out $OUT/encoder_forward_after > $W/ef.log 2>&1
echo "encoder_forward rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/tests.log
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind
for pass in 1 2; do
  timeout 200 python3 benchmarks/predict_speed.py --model $W/run --device cuda --mbp 100 --compile --formats none,bedgraph \
    --no-reference --window-bp 32768 --work $W --out $OUT/predict_speed_pass$pass > $W/ps$pass.log 2>&1
  echo "predict_speed pass $pass rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/tests.log
done
tail -n 3 $W/ps2.log >> $OUT/tests.log
cat $OUT/tests.log | tail -n 12; cat $OUT/predict_speed_pass2.md
