#!/bin/bash
# Call 3: which part of call 2's change pays: the code before (477d794, "old"), HEAD ("new": GPU tokens + pieces
# ahead), "noahead" (HEAD with region_probs(ahead=False) in TrackTask._write), "t1" (HEAD with one tokenizer
# thread instead of 4: the host's tokenizing is now a few C passes); bedGraph rows only, interleaved, 2 passes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r; W=/tmp/w; mkdir -p $R $W /tmp/old /tmp/noahead /tmp/t1; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/head_477d794.tgz -C /tmp/old
for v in noahead t1; do cp -r genolin benchmarks pyproject.toml /tmp/$v/; done
sed -i 's/shared=shared, ahead=True)/shared=shared, ahead=False)/' /tmp/noahead/genolin/tasks/track.py
sed -i 's/^CUDA_TOKEN_THREADS = 4/CUDA_TOKEN_THREADS = 1/' /tmp/t1/genolin/inference.py
grep -c "ahead=False" /tmp/noahead/genolin/tasks/track.py; grep "^CUDA_TOKEN_THREADS" /tmp/t1/genolin/inference.py
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
  (cd $code && PYTHONPATH=/tmp/site:$code timeout 80 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats bedgraph --work $W \
    --out $R/ps_$name > $R/ps_$name.log 2>&1); step "ps $name rc=$?"
}
ps old1 /tmp/old; ps new1 $NEW; ps noahead1 /tmp/noahead; ps t1_1 /tmp/t1
ps t1_2 /tmp/t1; ps noahead2 /tmp/noahead; ps new2 $NEW; ps old2 /tmp/old
(cd $R && tar czf $OUT/r.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-8; done
