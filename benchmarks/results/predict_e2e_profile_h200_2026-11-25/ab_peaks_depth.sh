#!/bin/bash
# Session 2026-11-25 (11th), issue 14: A/B of the previous code (8c6a612: graph break in the blocks, float64
# peak calling, one batch in the GPU's queue) against this session's, interleaved, end to end with a trained base
# track model, 102 Mbp, compiled, --window-bp 32768, inductor cache warmed by a first pass of each tree.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
REPO=$PWD OLD=$PWD/.bench_data/old/genolin_8c6a612
export PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH TORCHINDUCTOR_CACHE_DIR=/tmp/ind
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $OUT/machine.txt
W=/tmp/w; mkdir -p $W; T0=$(date +%s)
PYTHONPATH=/tmp/site:$REPO timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run \
  > $W/train.log 2>&1
echo "train rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/steps.txt
pass() {  # TREE NAME: predict_speed's child imports genolin from its working folder
  (cd $1 && PYTHONPATH=/tmp/site:$1 timeout 150 python3 $REPO/benchmarks/predict_speed.py --model $W/run --device cuda \
    --mbp 100 --compile --formats bedgraph --no-reference --window-bp 32768 --work $W --out $OUT/$2 > $W/$2.log 2>&1)
  echo "$2 rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/steps.txt
}
pass $REPO warmup_new; pass $OLD warmup_old
pass $OLD old1; pass $REPO new1; pass $OLD old2; pass $REPO new2
cat $OUT/steps.txt; grep -h "^| \(no\|yes\)" $OUT/old1.md $OUT/new1.md $OUT/old2.md $OUT/new2.md
(cd $OUT && tar czf ab.tgz *.json *.md && rm -f *.json *.md)
