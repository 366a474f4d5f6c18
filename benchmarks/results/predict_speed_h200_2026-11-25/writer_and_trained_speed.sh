#!/bin/bash
# Session 2026-11-25 (10th), call A: bedGraph writing before/after (synthetic, 100 Mbp), while a base track model
# trains 4 min (E. coli + B. amyloliquefaciens); then genome prediction speed with it, 102 Mbp, compiled, 32 kb windows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi -L > $OUT/gpus.txt; nproc >> $OUT/gpus.txt
B=.bench_data/bact; E="--fasta data/ecoli_k12/NC_000913.3.fa.bgz --tss $B/regulondb_10.9_tss.bed"
BA="--fasta $B/BACILLUS.fasta.gz --tss $B/BACILLUS.bed"
OMP_NUM_THREADS=4 timeout 330 python3 -m genolin -q train $E $BA --preset base --max-minutes 4 --device cuda --out /tmp/tr/hold_CJ > $OUT/train.log 2>&1 &
sleep 20
(cd .bench_data/old && PYTHONPATH=/tmp/site:$PWD timeout 100 python3 benchmarks/bedgraph_write.py --mbp 100 --workers 0 4 8 12 --out $OUT/bw_old > $OUT/bw_old.log 2>&1; echo "rc=$?" >> $OUT/bw_old.log)
timeout 100 python3 benchmarks/bedgraph_write.py --mbp 100 --workers 0 4 8 12 --out $OUT/bedgraph_write_h200 > $OUT/bw_new.log 2>&1; echo "rc=$?" >> $OUT/bw_new.log
grep -E "^\| [0-9]|rc=" $OUT/bw_old.log $OUT/bw_new.log
wait
tail -n 3 $OUT/train.log
timeout 200 python3 benchmarks/predict_speed.py --model /tmp/tr/hold_CJ --device cuda --mbp 100 --compile --formats none,bedgraph \
  --no-reference --work /tmp/ps --window-bp 32768 --out $OUT/predict_speed_trained_w32768 > $OUT/ps.log 2>&1; echo "rc=$?" >> $OUT/ps.log
grep -E "^(rc|\| (yes|no))" $OUT/ps.log
(cd /tmp/tr && tar czf $OUT/run_hold_CJ.tgz hold_CJ)
