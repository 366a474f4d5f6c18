#!/bin/bash
# Prepared for the next session (not run): HEAD (ranks run the one-process batches, parallel appends) against 54ffe60
# (call 3's code) on nvidia-h100-x2 (or nvidia-h200-x2), RC averaging, outputs on /dev/shm; 102 Mbp and 1 Gbp, one
# GPU and two, interleaved; the values of one and two GPUs compared (HEAD: expected identical). Before the call,
# here: `git archive 54ffe60 genolin benchmarks pyproject.toml | gzip > .bench_data/code_54ffe60.tgz`; carry .whl
# (pyfaidx, biopython, pybigwig) and .bench_data (that tarball, bact/regulondb_10.9_tss.bed).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r4; W=/tmp/w4; S=/dev/shm/s4; OLD=/tmp/old; mkdir -p $R $W $S $OLD; T0=$(date +%s); NEW=$PWD
D=benchmarks/results/predict_multi_gpu_h100x2_2026-11-25
tar xzf .bench_data/code_54ffe60.tgz -C $OLD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
(sleep ${WATCHDOG:-520}; cd $R && tar czf $OUT/r.tgz .) &
CUDA_VISIBLE_DEVICES=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "not fla" > $R/gpu_tests.log 2>&1 &
TESTS=$!  # every GPU test but fla's (their first compile outlasted call 1's limit), the new bit-for-bit one among them
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 0.6 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path; import pyfaidx
for m in (100, 1000):
    p = tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), m, Path('$W')); f = pyfaidx.Fasta(str(p)); print(p, len(f.keys()), sum(len(r) for r in f))" > $R/tiled.txt 2>&1
wait $TRAIN; wait $TESTS; echo "rc=$?" >> $R/gpu_tests.log; step "train, tiled, GPU tests"; tail -2 $R/gpu_tests.log
pr() {  # NAME GENOME GPUS CODE_DIR
  local cmd="python3 -m genolin"; [ $3 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  local t=$(date +%s.%N)
  (cd $4 && PYTHONPATH=/tmp/site:$4 timeout 200 $cmd predict --model $W/run --fasta $W/tiled_$2mbp.fa --rc-average --device cuda \
     --window-bp 32768 --out $S/o_$1 > $R/log_$1.txt 2>&1)
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | $4 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) |" | tee -a $R/table.md
}
echo "| arm | Mbp (tiled) | GPUs | code | exit | wall s | after load s |" > $R/table.md
pr warm 100 1 $NEW; rm -f $S/o_*
pr new_one_100 100 1 $NEW; pr new_two_100 100 2 $NEW
python3 $D/compare_values.py $S/o_new_one_100 $S/o_new_two_100 | tee $R/values_new_one_two_100.txt; rm -f $S/o_*
pr old_two_100 100 2 $OLD; pr old_one_100 100 1 $OLD; rm -f $S/o_*; step "102 Mbp"
pr new_two_1000_1 1000 2 $NEW; rm -f $S/o_*; pr old_two_1000_1 1000 2 $OLD; rm -f $S/o_*
pr new_one_1000 1000 1 $NEW; rm -f $S/o_*
pr old_two_1000_2 1000 2 $OLD; rm -f $S/o_*; pr new_two_1000_2 1000 2 $NEW; rm -f $S/o_*; step "1 Gbp"
(cd $R && tar czf $OUT/r.tgz .)
cat $R/table.md
