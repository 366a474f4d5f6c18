#!/bin/bash
# Session 2026-11-24 (6th): prediction with the blocks compiled in max-autotune-no-cudagraphs mode against the default mode; a training CLI check with compile_mode.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
W=/tmp/w; mkdir -p $W
G=data/ecoli_k12/NC_000913.3.fa.bgz
python3 -m genolin -q train --fasta $G --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base > $OUT/prep.log 2>&1
python3 -c "
import sys; sys.path.insert(0,'benchmarks')
from pathlib import Path
from predict_speed import tiled
print(tiled(Path('$G'), 100, Path('$W')))" >> $OUT/prep.log 2>&1
T=$W/tiled_100mbp.fa
cat > $W/autotune.py <<'PY'
import sys
from genolin.model import Encoder
orig = Encoder.compile_blocks
Encoder.compile_blocks = lambda self, **o: orig(self, **{"mode": "max-autotune-no-cudagraphs", **o})
from genolin.cli import cli
sys.argv[0] = "genolin"
cli()
PY
P="--model $W/run_base --fasta $T --rc-average --threshold 0.5 --compile"
tm() { name=$1; shift; /usr/bin/time -o $W/t -f "%e s wall" "$@" > $W/log 2>&1; echo "$name: $(cat $W/t); $(grep -h 'after the model was loaded' $W/log | tail -1)" >> $OUT/predict.log; }
tm "default mode, first (compiles)" timeout 150 python3 -m genolin predict $P --out $W/a
tm "default mode" timeout 150 python3 -m genolin predict $P --out $W/a
tm "max-autotune-no-cudagraphs, first (compiles, autotunes)" timeout 400 python3 $W/autotune.py predict $P --out $W/b
tm "max-autotune-no-cudagraphs" timeout 150 python3 $W/autotune.py predict $P --out $W/b
for s in plus.bedGraph minus.bedGraph peaks.bed; do cmp $W/a.$s <(sed 's/"b /"a /' $W/b.$s) > /dev/null && echo "  same $s" >> $OUT/predict.log || echo "  differ $s: $(diff <(tail -n +2 $W/a.$s) <(tail -n +2 $W/b.$s) | grep -c '^<') lines" >> $OUT/predict.log; done
rm -f $W/a.* $W/b.*
/usr/bin/time -f "%e s wall" timeout 300 python3 -m genolin train --fasta $G --tss data/ecoli_k12/gene_starts.bed --preset base --set compile=true --set compile_memory_budget=0.13 --set compile_mode=max-autotune-no-cudagraphs --set window_bp=200000 --set batch_size=1 --max-steps 40 --device cuda --out $W/run_cli > $OUT/train_cli.log 2>&1; echo "rc=$?" >> $OUT/train_cli.log
cat $OUT/predict.log; grep -v "^E1124\|AUTOTUNE\|triton_mm\|^  mm\|strides\|dtypes\|Autotune\|num_choices\|UserWarning\|current_out" $OUT/train_cli.log | tail -5
