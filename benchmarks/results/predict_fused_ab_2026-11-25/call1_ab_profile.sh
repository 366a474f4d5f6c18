#!/bin/bash
# Session 2026-11-25 (13th), call 1 (issue 14): GPU tests of the fused block kernels (7e24b65, written in the
# twelfth/thirteenth session without a GPU), genome prediction A/B against the code before them (2bd1214, carried
# as .bench_data/old_2bd1214.tgz) and with GENOLIN_FUSED=reference, bedGraph values old vs new on E. coli, and
# py-spy of eager `genolin predict` with and without RC. Run from the repository root on the device.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
R=/tmp/r; W=/tmp/w; mkdir -p $R $W /tmp/old; T0=$(date +%s); NEW=$PWD
step() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/steps.txt; }
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)") > $R/machine.txt
tar xzf .bench_data/old_2bd1214.tgz -C /tmp/old
(sleep 570; cd $R && tar czf $OUT/call1.tgz .) &  # a watchdog: what ran comes back if the call runs long
[ -f $W/run/best.safetensors ] || timeout 120 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz \
  --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda --out $W/run > $R/train.log 2>&1 &
TRAIN=$!
[ -f $R/gpu_tests.log ] || timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_fused.py tests/test_norm_conv.py tests/test_gpu.py \
  -k "fused or norm_conv or encoder_inference or predict" > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
wait $TRAIN; step "tests+train"; tail -2 $R/gpu_tests.log
python3 -c "from benchmarks.predict_speed import tiled; from pathlib import Path; print(tiled(Path('data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('$W')))"
G=$W/tiled_100mbp.fa
ps() {  # NAME CODE_DIR [ENV=VAL]: predict_speed eager, 102 Mbp, --window-bp 32768, rows none/bedgraph x RC off/on
  local name=$1 code=$2; shift 2
  (cd $code && env "$@" PYTHONPATH=/tmp/site:$code timeout 110 python3 benchmarks/predict_speed.py --device cuda \
    --model $W/run --fasta $G --no-reference --window-bp 32768 --formats none,bedgraph --work $W \
    --out $R/ps_$name > $R/ps_$name.log 2>&1); step "ps $name rc=$?"
}
# values: E. coli, RC, old and new code
for c in old new; do d=/tmp/old; [ $c = new ] && d=$NEW
  (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 -m genolin -q predict --model $W/run --fasta $NEW/data/ecoli_k12/NC_000913.3.fa.bgz \
    --device cuda --rc-average --window-bp 32768 --out $W/ecoli_$c); done
python3 - <<PY > $R/values_old_new.txt 2>&1
import numpy as np
def read(p):
    out = []
    for line in open(p):
        if line.startswith("track"): continue
        c, a, b, v = line.split(); out.append((int(a), int(b), float(v)))
    a = np.array(out); n = int(a[:, 1].max()); x = np.empty(n, np.float32)
    for s, e, v in out: x[s:e] = v
    return x
for s in ("plus", "minus"):
    o, n = read("$W/ecoli_old.%s.bedGraph" % s), read("$W/ecoli_new.%s.bedGraph" % s)
    d = np.abs(o - n); print(s, "bp", len(o), "max |diff|", d.max(), "bp differing", int((d > 0).sum()), "mean |diff|", d.mean())
print("peaks old/new lines:", sum(1 for _ in open("$W/ecoli_old.peaks.bed")), sum(1 for _ in open("$W/ecoli_new.peaks.bed")))
PY
step values; cat $R/values_old_new.txt
prof() {  # NAME ARGS...: `genolin -v predict` (new code, eager) under py-spy, every thread, idle included
  local name=$1; shift
  timeout 60 py-spy record --rate 100 --threads --idle --subprocesses --format raw -o $R/$name.raw -- \
    python3 -m genolin -v predict --model $W/run --fasta $G --out $W/p_$name --device cuda --window-bp 32768 "$@" > $R/$name.log 2>&1
  step "prof $name rc=$?"; rm -f $W/p_$name*
}
ps old1 /tmp/old X=1; ps new1 $NEW X=1
prof spy_norc; prof spy_rc --rc-average
ps newref1 $NEW GENOLIN_FUSED=reference; ps old2 /tmp/old X=1; ps new2 $NEW X=1
(cd $R && tar czf $OUT/call1.tgz .)
for f in $R/ps_*.md; do echo "== $f"; grep "^| \(yes\|no\)" $f | cut -d'|' -f2-8; done
