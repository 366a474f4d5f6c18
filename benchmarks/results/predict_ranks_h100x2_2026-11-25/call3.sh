#!/bin/bash
# Call 3 on nvidia-h100-x2: strand-per-rank torchrun prediction (HEAD) against runs of contigs per rank (ff7df51,
# the code of calls 1-2) at 1 Gbp with RC, outputs on /dev/shm; one and two GPUs' values compared at 102 Mbp; the
# new two-GPU test first. Before: `git archive ff7df51 genolin benchmarks pyproject.toml | gzip >
# .bench_data/code_ff7df51.tgz`; carry .whl and .bench_data.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r6; W=/tmp/w6; S=/dev/shm/s6; OLD=/tmp/old; mkdir -p $R $W $S $OLD; T0=$(date +%s); NEW=$PWD
D=benchmarks/results/predict_multi_gpu_h100x2_2026-11-25
tar xzf .bench_data/code_ff7df51.tgz -C $OLD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
(sleep ${WATCHDOG:-450}; cd $R && tar czf $OUT/r.tgz .) &
timeout 150 python3 -m pytest -v -p no:cacheprovider tests/test_gpu.py -k "two_gpus or computed_ahead or replayed" > $R/gpu_tests.log 2>&1 &
TESTS=$!
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 0.6 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path
for m in (100, 1000): print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), m, Path('$W')))" > $R/tiled.txt 2>&1
wait $TRAIN; wait $TESTS; echo "rc=$?" >> $R/gpu_tests.log; step "train, tiled, tests"; grep -E "PASSED|FAILED|ERROR|rc=" $R/gpu_tests.log
pr() {  # NAME GENOME GPUS CODE_DIR RC_FLAG
  local cmd="python3 -m genolin"; [ $3 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  local t=$(date +%s.%N)
  (cd $4 && PYTHONPATH=/tmp/site:$4 timeout 150 $cmd -v predict --model $W/run --fasta $W/tiled_$2mbp.fa $5 --device cuda \
     --window-bp 32768 --out $S/o_$1 > $R/log_$1.txt 2>&1)
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | $4 | $5 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) |" | tee -a $R/table.md
}
echo "| arm | Mbp (tiled) | GPUs | code | RC | exit | wall s | after load s |" > $R/table.md
pr one_100 100 1 $NEW --rc-average; pr two_100 100 2 $NEW --rc-average
python3 $D/compare_values.py $S/o_one_100 $S/o_two_100 | tee $R/values_one_two_100.txt
same() { cmp <(tail -n +2 $S/o_one_100.$1) <(tail -n +2 $S/o_two_100.$1); }  # the track lines hold the names
same plus.bedGraph && same minus.bedGraph && same peaks.bed && echo "102 Mbp: one and two GPUs byte-identical" | tee -a $R/values_one_two_100.txt
rm -f $S/o_*; step "102 Mbp"
pr new_two_1 1000 2 $NEW --rc-average; rm -f $S/o_*; pr old_two_1 1000 2 $OLD --rc-average; rm -f $S/o_*
pr new_two_2 1000 2 $NEW --rc-average; rm -f $S/o_*; pr new_one 1000 1 $NEW --rc-average; rm -f $S/o_*
pr new_two_norc 1000 2 $NEW --no-rc-average; rm -f $S/o_*; pr old_two_2 1000 2 $OLD --rc-average; rm -f $S/o_*; step "1 Gbp"
(cd $R && tar czf $OUT/r.tgz .)
cat $R/table.md; grep -h "rank .:" $R/log_*two*.txt
