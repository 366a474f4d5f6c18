#!/bin/bash
# Call 3 (nvidia-h100-x2): the code with torch.compile opt-in (call 2: genomes >= 200 Mbp compiled by default and
# ran slower than eager). Outputs on /dev/shm. 102 Mbp: one GPU against two, values compared per base
# (compare_values.py); 1,004 Mbp (E. coli tiled into 216 contigs): one GPU against two, eager, interleaved, and one
# GPU with --compile. Base track model trained 0.6 min. Carries .whl and .bench_data as call1.sh.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r3; W=/tmp/w3; S=/dev/shm/s3; mkdir -p $R $W $S; T0=$(date +%s); D=benchmarks/results/predict_multi_gpu_h100x2_2026-11-25
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; git log --oneline -1; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
(sleep ${WATCHDOG:-400}; cd $R && tar czf $OUT/r.tgz .) &
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 0.6 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path; import pyfaidx
for m in (100, 1000):
    p = tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), m, Path('$W')); f = pyfaidx.Fasta(str(p)); print(p, len(f.keys()), sum(len(r) for r in f))" > $R/tiled.txt 2>&1
wait $TRAIN; step "train, tiled"
pr() {  # NAME GENOME GPUS EXTRA
  local cmd="python3 -m genolin"; [ $3 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  local t=$(date +%s.%N)
  timeout 200 $cmd predict --model $W/run --fasta $W/tiled_$2mbp.fa --rc-average $4 --device cuda --window-bp 32768 --out $S/o_$1 > $R/log_$1.txt 2>&1
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | rc $4 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) | $(du -bc $S/o_$1.* | tail -1 | cut -f1) |" | tee -a $R/table.md
}
echo "| arm | Mbp (tiled) | GPUs | options | exit | wall s | after load s | output bytes |" > $R/table.md
pr one_100 100 1; pr two_100 100 2
python3 $D/compare_values.py $S/o_one_100 $S/o_two_100 | tee $R/values_one_two_100.txt; rm -f $S/o_*; step "102 Mbp"
pr two_1000_1 1000 2; rm -f $S/o_*; pr one_1000_1 1000 1; rm -f $S/o_*
pr one_1000_compile 1000 1 --compile; rm -f $S/o_*
pr one_1000_2 1000 1; rm -f $S/o_*; pr two_1000_2 1000 2; rm -f $S/o_*; step "1 Gbp"
(cd $R && tar czf $OUT/r.tgz .)
cat $R/table.md
