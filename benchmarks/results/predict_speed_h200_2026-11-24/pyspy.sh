python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
W=/tmp/w; mkdir -p $W
G=.bench_data/ecoli_k12/NC_000913.3.fa.bgz
[ -f $W/run_base/config.json ] || python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base > $OUT/prep.log 2>&1
[ -f $W/tiled_100mbp.fa ] || python3 -c "
import sys; sys.path.insert(0,'benchmarks')
from pathlib import Path
from predict_speed import tiled
print(tiled(Path('$G'), 100, Path('$W')))" >> $OUT/prep.log 2>&1
T=$W/tiled_100mbp.fa
t() { name=$1; shift; /usr/bin/time -f "$name wall %e s maxrss %M KB" timeout 100 python3 -m genolin -q predict --model $W/run_base --fasta $T "$@" 2>&1 | grep wall >> $OUT/cli.log; }
t rc_compile_1 --rc-average --compile --out $W/a
t rc_compile_2 --rc-average --compile --out $W/b
t rc_eager --rc-average --no-compile --out $W/c
t norc_compile --compile --out $W/d
t norc_eager --no-compile --out $W/e
for s in plus minus; do cmp <(tail -n +2 $W/a.$s.bedGraph) <(tail -n +2 $W/c.$s.bedGraph) > /dev/null && echo "rc compile = eager $s" >> $OUT/cli.log || echo "rc compile != eager $s (bf16 fusion)" >> $OUT/cli.log; done
timeout 100 py-spy record -r 40 --threads --format raw -o $OUT/spy_rc_compile2.txt -- python3 -m genolin -q predict --model $W/run_base --fasta $T --rc-average --compile --out $W/f > $OUT/spy.log 2>&1
cat $OUT/cli.log
