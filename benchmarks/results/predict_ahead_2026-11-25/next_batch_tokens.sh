#!/bin/bash
# Prepared for the next session (not run): the host's per-batch work (launch, gather, the main thread's writers and
# promoter calls, all sharing the GIL) bounds bedGraph without RC; fewer, larger batches pay it fewer times. A/B of
# HEAD against HEAD with WINDOW_BATCH_TOKENS[cuda] 2**19 and 2**20 (sed in copies) and against HEAD with the GIL's
# switch interval at 0.5 ms instead of 5 ("sw": a thread waiting for the GIL waits up to the interval while another
# computes; the pieces thread and the main thread hand it back and forth every batch), bedGraph rows, interleaved,
# 2 passes, plus the E. coli values of 2**20 against HEAD. Needs .bench_data/bact (RegulonDB BED) and .whl as
# call4.sh; WATCHDOG below the call's limit_s.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r5; W=/tmp/w5; mkdir -p $R $W /tmp/b19 /tmp/b20 /tmp/sw; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
for v in 19 20; do cp -r genolin benchmarks pyproject.toml /tmp/b$v/
  sed -i "s/^WINDOW_BATCH_TOKENS = {False: 2\*\*15, True: 2\*\*18}/WINDOW_BATCH_TOKENS = {False: 2**15, True: 2**$v}/" /tmp/b$v/genolin/inference.py
  grep "^WINDOW_BATCH_TOKENS" /tmp/b$v/genolin/inference.py; done
cp -r genolin benchmarks pyproject.toml /tmp/sw/
sed -i 's/^    box: queue.Queue = queue.Queue(depth)$/    import sys; sys.setswitchinterval(0.0005); box: queue.Queue = queue.Queue(depth)/' /tmp/sw/genolin/inference.py
grep -c "setswitchinterval" /tmp/sw/genolin/inference.py
(sleep ${WATCHDOG:-420}; cd $R && tar czf $OUT/r.tgz .) &
timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
# every GPU test first: the review edit of 4b37506 (GraphedForward without None inputs) has not run on a GPU
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
wait $TRAIN; step "tests+train"; tail -3 $R/gpu_tests.log
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))"
G=$W/tiled_100mbp.fa
for c in head b20; do d=$NEW; [ $c = b20 ] && d=/tmp/b20
  (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 -m genolin -q predict --model $W/run --fasta $NEW/data/ecoli_k12/NC_000913.3.fa.bgz \
    --device cuda --rc-average --window-bp 32768 --out $W/ecoli_$c); done
python3 benchmarks/results/predict_cuda_graphs_2026-11-25/compare_bedgraph.py $W/ecoli_head $W/ecoli_b20 > $R/values_head_b20.txt 2>&1
step values; cat $R/values_head_b20.txt
ps() {  # NAME CODE_DIR
  (cd $2 && PYTHONPATH=/tmp/site:$2 timeout 80 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats bedgraph --work $W \
    --out $R/ps_$1 > $R/ps_$1.log 2>&1); step "ps $1 rc=$?"
}
ps head1 $NEW; ps b19_1 /tmp/b19; ps b20_1 /tmp/b20; ps sw_1 /tmp/sw
ps sw_2 /tmp/sw; ps b20_2 /tmp/b20; ps b19_2 /tmp/b19; ps head2 $NEW
(cd $R && tar czf $OUT/r.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-10; done
