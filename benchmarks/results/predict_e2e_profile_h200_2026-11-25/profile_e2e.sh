#!/bin/bash
# Session 2026-11-25 (11th), issue 14: where `genolin predict`'s time goes end to end on one H200 (py-spy of the
# whole command, inductor cache cold and warm), and torch.compile's max-autotune on the genome batch's forward.
# Run from the repository root on the device; results under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $OUT/machine.txt
W=/tmp/w; mkdir -p $W
T0=$(date +%s)
timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run \
  > $OUT/train.log 2>&1
echo "train rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/steps.txt
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; \
print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))" >> $OUT/steps.txt
G=$W/tiled_100mbp.fa
prof() {  # NAME CACHE_DIR ARGS...: `genolin -v predict` under py-spy (every thread, idle included)
  local name=$1 cache=$2; shift 2
  local t=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=$cache timeout 120 py-spy record --rate 50 --threads --idle --subprocesses --format raw \
    -o $W/$name.raw -- python3 -m genolin -v predict --model $W/run --fasta $G --out $W/p_$name --device cuda "$@" \
    > $W/$name.log 2>&1
  echo "$name rc=$? wall $(python3 -c "import time; print(round(time.time() - $t, 2))") s: $*" >> $OUT/steps.txt
  rm -f $W/p_$name*
}
prof cold_rc_compiled /tmp/c1 --rc-average --window-bp 32768 --compile
prof warm_rc_compiled /tmp/c1 --rc-average --window-bp 32768 --compile
prof warm2_rc_compiled /tmp/c1 --rc-average --window-bp 32768 --compile
prof warm_norc_compiled_firstshape /tmp/c1 --window-bp 32768 --compile
prof warm_norc_compiled /tmp/c1 --window-bp 32768 --compile
prof eager_rc /tmp/c1 --rc-average --window-bp 32768
(cd $W && tail -n 25 *.log > $OUT/predict_logs.txt; tar czf $OUT/pyspy_raw.tgz *.raw)
echo "profiles done $(( $(date +%s) - T0 )) s" >> $OUT/steps.txt
timeout 200 python3 benchmarks/encoder_forward.py --device cuda --batch 128 --no-plain --profile-all --profile-rows 30 \
  --variant "half_compiled:bf16=1;compile=1" \
  --variant "half_autotuned:bf16=1;compile=1;mode=max-autotune-no-cudagraphs" \
  --out $OUT/encoder_forward_autotune > $W/ef.log 2>&1
echo "encoder_forward rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/steps.txt
tail -n 5 $W/ef.log >> $OUT/steps.txt
cat $OUT/steps.txt
