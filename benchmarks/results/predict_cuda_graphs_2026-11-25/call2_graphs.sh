#!/bin/bash
# Session 2026-11-25 (13th), call 2 (issue 14): genome batches replayed from CUDA graphs and tokenized by 4
# threads (working tree) against the code before (7e24b65, carried as .bench_data/cur_7e24b65.tgz): GPU tests,
# predict_speed A/B (eager, 102 Mbp, --window-bp 32768, interleaved passes), bedGraph values before/after on
# E. coli, py-spy of the new code. Run from the repository root on the device.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r2; W=/tmp/w; mkdir -p $R $W /tmp/cur; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/cur_7e24b65.tgz -C /tmp/cur
(sleep 560; cd $R && tar czf $OUT/call2.tgz .) &  # a watchdog: what ran comes back if the call runs long
[ -f $W/run/best.safetensors ] || timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "graph or genome_prediction or fused or norm_conv" \
  > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
wait $TRAIN; step "tests+train"; tail -3 $R/gpu_tests.log
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))"
G=$W/tiled_100mbp.fa
ps() {  # NAME CODE_DIR: predict_speed eager, 102 Mbp, --window-bp 32768, rows none/bedgraph x RC off/on
  local name=$1 code=$2
  (cd $code && PYTHONPATH=/tmp/site:$code timeout 100 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats none,bedgraph --work $W \
    --out $R/ps_$name > $R/ps_$name.log 2>&1); step "ps $name rc=$?"
}
for c in cur new; do d=/tmp/cur; [ $c = new ] && d=$NEW
  (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 -m genolin -q predict --model $W/run --fasta $NEW/data/ecoli_k12/NC_000913.3.fa.bgz \
    --device cuda --rc-average --window-bp 32768 --out $W/ecoli_$c); done
python3 benchmarks/results/predict_cuda_graphs_2026-11-25/compare_bedgraph.py $W/ecoli_cur $W/ecoli_new > $R/values_cur_new.txt 2>&1
step values; cat $R/values_cur_new.txt
ps cur1 /tmp/cur; ps new1 $NEW
prof() {  # NAME ARGS...: `genolin -v predict` (new code) under py-spy, every thread, idle included
  local name=$1; shift
  timeout 60 py-spy record --rate 100 --threads --idle --subprocesses --format raw -o $R/$name.raw -- \
    python3 -m genolin -v predict --model $W/run --fasta $G --out $W/p_$name --device cuda --window-bp 32768 "$@" > $R/$name.log 2>&1
  step "prof $name rc=$?"; rm -f $W/p_$name*
}
prof spy_norc; prof spy_rc --rc-average
ps cur2 /tmp/cur; ps new2 $NEW
(cd $R && tar czf $OUT/call2.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-8; done
