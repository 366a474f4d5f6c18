#!/bin/bash
# Call 2 on nvidia-h100-x2: the GPU tests call 1 left (the new mixers, fla's), on GPU 1 while one-GPU predictions of
# 1 Gbp run on GPU 0 (without RC twice, with RC once); then two GPUs (RC twice, without RC once), all with -v for
# the ranks' phase timings (own contigs, barrier, appends). Outputs on /dev/shm. Carry .whl and .bench_data.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r5; W=/tmp/w5; S=/dev/shm/s5; mkdir -p $R $W $S; T0=$(date +%s)
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
(sleep ${WATCHDOG:-470}; cd $R && tar czf $OUT/r.tgz .) &
(CUDA_VISIBLE_DEVICES=1 timeout 60 python3 -m pytest -v -p no:cacheprovider tests/test_gpu.py -k "linformer or fnet or synthesizer" > $R/gpu_tests_mixers.log 2>&1
 echo "rc=$?" >> $R/gpu_tests_mixers.log
 CUDA_VISIBLE_DEVICES=1 timeout 270 python3 -m pytest -v -p no:cacheprovider tests/test_gpu.py -k "fla or gla or deltanet" > $R/gpu_tests_fla.log 2>&1
 echo "rc=$?" >> $R/gpu_tests_fla.log) &
TESTS=$!
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 0.6 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path
print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 1000, Path('$W')))" > $R/tiled.txt 2>&1
wait $TRAIN; step "train, tiled"
pr() {  # NAME GPUS RC_FLAG
  local cmd="python3 -m genolin"; [ $2 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  local t=$(date +%s.%N)
  timeout 150 $cmd -v predict --model $W/run --fasta $W/tiled_1000mbp.fa $3 --device cuda --window-bp 32768 \
     --out $S/o_$1 > $R/log_$1.txt 2>&1
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) |" | tee -a $R/table.md
  rm -f $S/o_*
}
echo "| arm | GPUs | RC | exit | wall s | after load s |" > $R/table.md
export CUDA_VISIBLE_DEVICES=0
pr one_norc_1 1 --no-rc-average; pr one_norc_2 1 --no-rc-average; pr one_rc 1 --rc-average; step "one GPU"
wait $TESTS; step "tests"; unset CUDA_VISIBLE_DEVICES
pr two_rc_1 2 --rc-average; pr two_rc_2 2 --rc-average; pr two_norc 2 --no-rc-average; step "two GPUs"
(cd $R && tar czf $OUT/r.tgz .)
cat $R/table.md; grep -h "rank .:" $R/log_two_*.txt; tail -3 $R/gpu_tests_*.log
