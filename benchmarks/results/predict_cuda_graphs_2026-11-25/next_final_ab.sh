#!/bin/bash
# Prepared for the next session (not run): call3_final.sh with its watchdog below the call's limit (WATCHDOG
# seconds, default 420: set it under the run's limit_s, which shrinks when little device time is left) and the
# first-graphs arm dropped: the final code (working tree) against 7e24b65 (.bench_data/cur_7e24b65.tgz): GPU tests,
# predict_speed A/B (eager, 102 Mbp, --window-bp 32768, interleaved passes), bedGraph values before/after on
# E. coli, py-spy of the new code. Run from the repository root on the device.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r3; W=/tmp/w; mkdir -p $R $W /tmp/cur /tmp/g1; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/cur_7e24b65.tgz -C /tmp/cur
(sleep ${WATCHDOG:-420}; cd $R && tar czf $OUT/next.tgz .) &  # a watchdog: what ran comes back if the call runs long
[ -f $W/run/best.safetensors ] || timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "graph or genome_prediction or fused or norm_conv or encoder_inference" \
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
ps new2 $NEW; ps cur2 /tmp/cur
# torch.profiler's op table of the current forward (graphs off so the ops show), 20 Mbp, RC on
GENOLIN_CUDA_GRAPHS=0 timeout 120 python3 benchmarks/predict_profile.py --model $W/run --device cuda --mbp 20 \
  --window-bp 32768 --profile-batches 4 --work $W --out $R/profile_rc > $R/profile_rc.log 2>&1; step "profile rc=$?"
(cd $R && tar czf $OUT/next.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-8; done
