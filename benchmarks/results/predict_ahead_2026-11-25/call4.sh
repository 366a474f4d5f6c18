#!/bin/bash
# Call 4: the kept bins gathered on the GPU (80d2791, "new") against the code before it (9858749, "prev": GPU tokens,
# pieces ahead, one reading thread); every GPU test; bedGraph values prev/new on E. coli; predict_speed bedGraph rows
# interleaved (2 passes), then bedGraph and bigWig rows of the new code once.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r4; W=/tmp/w4; mkdir -p $R $W /tmp/prev; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/head_9858749.tgz -C /tmp/prev
(sleep ${WATCHDOG:-420}; cd $R && tar czf $OUT/r.tgz .) &
timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/test_gpu.py > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
wait $TRAIN; step "tests+train"; tail -3 $R/gpu_tests.log
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))"
G=$W/tiled_100mbp.fa
for c in prev new; do d=/tmp/prev; [ $c = new ] && d=$NEW
  (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 -m genolin -q predict --model $W/run --fasta $NEW/data/ecoli_k12/NC_000913.3.fa.bgz \
    --device cuda --rc-average --window-bp 32768 --out $W/ecoli_$c); done
python3 benchmarks/results/predict_cuda_graphs_2026-11-25/compare_bedgraph.py $W/ecoli_prev $W/ecoli_new > $R/values_prev_new.txt 2>&1
step values; cat $R/values_prev_new.txt
ps() {  # NAME CODE_DIR FORMATS
  local name=$1 code=$2
  (cd $code && PYTHONPATH=/tmp/site:$code timeout 90 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats $3 --work $W \
    --out $R/ps_$name > $R/ps_$name.log 2>&1); step "ps $name rc=$?"
}
ps prev1 /tmp/prev bedgraph; ps new1 $NEW bedgraph; ps new2 $NEW bedgraph; ps prev2 /tmp/prev bedgraph
ps new_all $NEW none,bedgraph,bigwig
(cd $R && tar czf $OUT/r.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-10; done
