#!/bin/bash
# Fifteenth session, call 1 (nvidia-h100-x2: two H100s of one host). Every GPU test (fla-core carried) on GPU 1
# while the base track model trains 1.2 min on GPU 0 (E. coli, RegulonDB 10.9); E. coli tiled to 102 and 408 Mbp;
# `genolin predict` on one GPU against `torchrun --nproc-per-node 2` (contigs shared out, `contig_shards`),
# bedGraph, with and without --rc-average, interleaved; the outputs of one and two GPUs compared byte for byte;
# then one GPU with genome batches of 2**20 tokens (WINDOW_BATCH_TOKENS, a sed copy) against HEAD.
# Needs .whl (pyfaidx, biopython, pybigwig, fla-core, py-spy) and .bench_data/bact/regulondb_10.9_tss.bed, carried.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r1; W=/tmp/w1; mkdir -p $R $W /tmp/b20; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nvidia-smi topo -m; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
cp -r genolin benchmarks pyproject.toml /tmp/b20/
sed -i "s/^WINDOW_BATCH_TOKENS = {False: 2\*\*15, True: 2\*\*18}/WINDOW_BATCH_TOKENS = {False: 2**15, True: 2**20}/" /tmp/b20/genolin/inference.py
grep "^WINDOW_BATCH_TOKENS" /tmp/b20/genolin/inference.py >> $R/steps.txt
(sleep ${WATCHDOG:-540}; cd $R && tar czf $OUT/r.tgz .) &
CUDA_VISIBLE_DEVICES=1 timeout 250 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $R/gpu_tests.log 2>&1 &
TESTS=$!
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path; import pyfaidx
for m in (100, 400):
    p = tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), m, Path('$W')); f = pyfaidx.Fasta(str(p)); print(p, len(f.keys()), sum(len(r) for r in f))" > $R/tiled.txt 2>&1
wait $TRAIN; step train; wait $TESTS; echo "rc=$?" >> $R/gpu_tests.log; step tests; tail -2 $R/gpu_tests.log
# NAME GENOME GPUS RC CODE_DIR: one timed genolin predict (bedGraph), wall clock and genolin's after-load seconds
pr() {
  local rc=""; [ $4 = rc ] && rc=--rc-average
  local cmd="python3 -m genolin"; [ $3 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  local t=$(date +%s.%N)
  (cd $5 && PYTHONPATH=/tmp/site:$5 timeout 150 $cmd predict --model $W/run --fasta $W/tiled_$2mbp.fa $rc --device cuda \
     --window-bp 32768 --out $W/o_$1 > $R/log_$1.txt 2>&1)
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | $4 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) |" | tee -a $R/table.md
}
echo "| arm | Mbp (tiled) | GPUs | RC | exit | wall s | after load s |" > $R/table.md
for p in 1 2; do
  pr one_rc_$p 100 1 rc $NEW; pr two_rc_$p 100 2 rc $NEW; pr one_norc_$p 100 1 norc $NEW; pr two_norc_$p 100 2 norc $NEW
done
step "102 Mbp"
for s in plus.bedGraph minus.bedGraph peaks.bed; do
  for m in rc_1 norc_1; do cmp $W/o_one_$m.$s $W/o_two_$m.$s > /dev/null && echo "one = two ($m): $s" || echo "one != two ($m): $s"; done
done | tee $R/same.txt
rm -f $W/o_*
pr two_rc_400 400 2 rc $NEW; pr one_rc_400 400 1 rc $NEW; pr one_norc_400 400 1 norc $NEW; pr two_norc_400 400 2 norc $NEW
for s in plus.bedGraph minus.bedGraph peaks.bed; do cmp $W/o_one_rc_400.$s $W/o_two_rc_400.$s > /dev/null && echo "one = two (rc_400): $s" || echo "one != two (rc_400): $s"; done | tee -a $R/same.txt
rm -f $W/o_*; step "408 Mbp"
for p in 1 2; do pr b20_norc_$p 100 1 norc /tmp/b20; pr b20_rc_$p 100 1 rc /tmp/b20; done
step "b20"
(cd $R && tar czf $OUT/r.tgz .)
cat $R/table.md
