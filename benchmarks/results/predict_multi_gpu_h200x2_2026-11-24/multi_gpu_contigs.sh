#!/bin/bash
# Session 2026-11-24 (6th): one H200 against two (torchrun) with contigs shared out per rank; base track model, E. coli tiled to 102 Mbp (22 contigs).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi -L > $OUT/env.txt; nproc >> $OUT/env.txt; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/env.txt
W=/tmp/w; mkdir -p $W
G=data/ecoli_k12/NC_000913.3.fa.bgz
python3 -m genolin -q train --fasta $G --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base > $OUT/prep.log 2>&1
python3 -c "
import sys; sys.path.insert(0,'benchmarks')
from pathlib import Path
from predict_speed import tiled
print(tiled(Path('$G'), 100, Path('$W')))" >> $OUT/prep.log 2>&1
T=$W/tiled_100mbp.fa
tm() { name=$1; shift; /usr/bin/time -o $W/t -f "%e s wall, max RSS %M KB" "$@" > $W/log 2>&1; echo "$name: $(cat $W/t); $(grep -h 'after the model was loaded' $W/log | tail -1)" >> $OUT/multi.log; grep -h "shared over\|contig(s)" $W/log >> $OUT/multi_detail.log; }
same() { for s in plus.bedGraph minus.bedGraph peaks.bed; do cmp <(tail -n +2 $W/$1.$s) <(tail -n +2 $W/$2.$s) > /dev/null && echo "  $1 = $2: $s" >> $OUT/multi.log || echo "  $1 != $2: $s" >> $OUT/multi.log; done; }
for rc in "--rc-average"; do
  P="--model $W/run_base --fasta $T $rc --threshold 0.5"
  tm "warm-up (compile cache), 1 GPU $rc" env CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin predict $P --compile --out $W/w
  tm "1 GPU, compile $rc" env CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin predict $P --compile --out $W/one
  tm "2 GPUs, compile $rc" timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m genolin predict $P --compile --out $W/two
  same one two; rm -f $W/one* $W/two* $W/w.*
done
ls -a $W >> $OUT/multi_detail.log
cat $OUT/multi.log
