#!/bin/bash
# Prediction with the blocks compiled in max-autotune-no-cudagraphs mode against the default mode, 102 Mbp, --rc-average (p17d's wrapper lacked a __main__ guard: the format pool's spawned processes re-ran the CLI).
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
if __name__ == "__main__":  # the bedGraph format pool spawns processes that import this file
    from genolin.cli import cli
    cli(prog_name="genolin")
PY
P="--model $W/run_base --fasta $T --rc-average --threshold 0.5 --compile"
timeout 100 python3 -m genolin predict $P --out $W/a > $OUT/default1.log 2>&1
timeout 100 python3 -m genolin predict $P --out $W/a > $OUT/default2.log 2>&1
timeout 300 python3 $W/autotune.py predict $P --out $W/b > $OUT/autotune1.log 2>&1; echo "rc=$?" >> $OUT/autotune1.log
timeout 100 python3 $W/autotune.py predict $P --out $W/b > $OUT/autotune2.log 2>&1; echo "rc=$?" >> $OUT/autotune2.log
timeout 100 python3 -m genolin predict $P --out $W/a > $OUT/default3.log 2>&1
grep -h "after the model\|error" $OUT/default*.log $OUT/autotune*.log | grep -v "^E1124" | head; for s in plus.bedGraph minus.bedGraph peaks.bed; do cmp <(tail -n +2 $W/a.$s) <(tail -n +2 $W/b.$s) > /dev/null && echo "same $s" || echo "differ $s"; done
