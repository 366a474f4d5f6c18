#!/bin/bash
# Call 2: genome windows tokenized on the GPU (padded_codes on the host, window_ids inside the forward's graph) and
# pieces computed ahead, against the code before both (477d794): GPU tests, bedGraph values on E. coli,
# predict_speed A/B interleaved (eager, 102 Mbp, --window-bp 32768), py-spy of the
# new code. Run from the repository root on the device; WATCHDOG below limit_s.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r; W=/tmp/w; mkdir -p $R $W /tmp/old; T0=$(date +%s); NEW=$PWD; HERE=benchmarks/results/predict_ahead_2026-11-25
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/head_477d794.tgz -C /tmp/old
(sleep ${WATCHDOG:-420}; cd $R && tar czf $OUT/r.tgz .) &
timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "graph or ahead or genome_prediction" \
  > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
wait $TRAIN; step "tests+train"; tail -3 $R/gpu_tests.log
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))"
G=$W/tiled_100mbp.fa
ps() {  # NAME CODE_DIR
  local name=$1 code=$2
  (cd $code && PYTHONPATH=/tmp/site:$code timeout 100 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats none,bedgraph --work $W \
    --out $R/ps_$name > $R/ps_$name.log 2>&1); step "ps $name rc=$?"
}
for c in old new; do d=/tmp/old; [ $c = new ] && d=$NEW
  (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 -m genolin -q predict --model $W/run --fasta $NEW/data/ecoli_k12/NC_000913.3.fa.bgz \
    --device cuda --rc-average --window-bp 32768 --out $W/ecoli_$c); done
python3 benchmarks/results/predict_cuda_graphs_2026-11-25/compare_bedgraph.py $W/ecoli_old $W/ecoli_new > $R/values_old_new.txt 2>&1
step values; cat $R/values_old_new.txt
ps old1 /tmp/old; ps new1 $NEW
prof() {
  local name=$1; shift
  timeout 60 py-spy record --rate 100 --threads --idle --subprocesses --format raw -o $R/$name.raw -- \
    python3 -m genolin -v predict --model $W/run --fasta $G --out $W/p_$name --device cuda --window-bp 32768 "$@" > $R/$name.log 2>&1
  step "prof $name rc=$?"; rm -f $W/p_$name*
}
prof spy_norc; prof spy_rc --rc-average
ps new2 $NEW; ps old2 /tmp/old
(cd $R && tar czf $OUT/r.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-8; done
