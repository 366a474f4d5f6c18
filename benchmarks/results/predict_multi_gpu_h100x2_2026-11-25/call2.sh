#!/bin/bash
# Call 2 (nvidia-h100-x2): why two GPUs gave no speed-up in call 1 and 408 Mbp ran 1.5x slower per Mbp than 102.
# The disk's write speed (dd) against tmpfs; output sizes; one GPU against two with the outputs on /tmp and on
# /dev/shm (tmpfs); the outputs of one and two GPUs compared without their track lines (which name the prefix);
# py-spy of a two-GPU run. Carries .whl and .bench_data as call1.sh.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r2; W=/tmp/w2; S=/dev/shm/s2; mkdir -p $R $W $S; T0=$(date +%s)
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; free -g; df -hT /tmp /dev/shm; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt 2>&1
(sleep ${WATCHDOG:-550}; cd $R && tar czf $OUT/r.tgz .) &
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
python3 -c "
from benchmarks.predict_speed import tiled; from pathlib import Path; import pyfaidx
for m in (100, 400):
    p = tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), m, Path('$W')); f = pyfaidx.Fasta(str(p)); print(p, len(f.keys()), sum(len(r) for r in f))" > $R/tiled.txt 2>&1
for d in /tmp $S; do for n in 1 2; do
  t=$(date +%s.%N); dd if=/dev/zero of=$d/dd bs=16M count=256 2>/dev/null; sync; e=$(date +%s.%N)
  echo "dd 4 GiB + sync to $d (pass $n): $(python3 -c "print(f'{4096/($e-$t):.0f} MiB/s')")" | tee -a $R/disk.txt; rm -f $d/dd; done; done
wait $TRAIN; step train
pr() {  # NAME GENOME GPUS RC OUTDIR [py-spy]
  local rc=""; [ $4 = rc ] && rc=--rc-average
  local cmd="python3 -m genolin"; [ $3 = 2 ] && cmd="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin"
  [ "$6" = spy ] && cmd="py-spy record --subprocesses --idle --rate 100 --format raw -o $R/pyspy_$1.txt -- $cmd"
  local t=$(date +%s.%N)
  timeout 150 $cmd predict --model $W/run --fasta $W/tiled_$2mbp.fa $rc --device cuda --window-bp 32768 --out $5/o_$1 > $R/log_$1.txt 2>&1
  local s=$?; local e=$(python3 -c "print(f'{$(date +%s.%N) - $t:.2f}')")
  echo "| $1 | $2 | $3 | $4 | $5 | $s | $e | $(grep -ho '[0-9.]* s after the model was loaded' $R/log_$1.txt | head -1 | cut -d' ' -f1) | $(du -bc $5/o_$1.* | tail -1 | cut -f1) |" | tee -a $R/table.md
}
same() { for s in plus.bedGraph minus.bedGraph peaks.bed; do cmp <(tail -n +2 $1.$s) <(tail -n +2 $2.$s) > /dev/null && echo "$1 = $2: $s" || echo "$1 != $2: $s"; done | tee -a $R/same.txt; }
echo "| arm | Mbp (tiled) | GPUs | RC | out | exit | wall s | after load s | output bytes |" > $R/table.md
pr one_norc_tmp 100 1 norc $W; pr one_rc_tmp 100 1 rc $W; rm -f $W/o_*
for p in 1 2; do
  pr one_rc_$p 100 1 rc $S; pr two_rc_$p 100 2 rc $S; pr one_norc_$p 100 1 norc $S; pr two_norc_$p 100 2 norc $S
  same $S/o_one_rc_$p $S/o_two_rc_$p; same $S/o_one_norc_$p $S/o_two_norc_$p; rm -f $S/o_*
done
step "102 Mbp"
pr one_rc_400 400 1 rc $S; pr two_rc_400 400 2 rc $S; same $S/o_one_rc_400 $S/o_two_rc_400; rm -f $S/o_*
pr two_norc_400 400 2 norc $S; pr one_norc_400 400 1 norc $S; rm -f $S/o_*
step "408 Mbp"
pr two_rc_spy 100 2 rc $S spy; rm -f $S/o_*; step spy
(cd $R && gzip -f pyspy_*.txt; tar czf $OUT/r.tgz .)
cat $R/disk.txt $R/same.txt $R/table.md
