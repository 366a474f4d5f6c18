python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
nvidia-smi -L > $OUT/env.txt; nproc >> $OUT/env.txt
W=/tmp/w; mkdir -p $W
G=data/ecoli_k12/NC_000913.3.fa.bgz
python3 -m genolin -q train --fasta $G --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base > $OUT/prep.log 2>&1
python3 -c "
import sys; sys.path.insert(0,'benchmarks')
from pathlib import Path
from predict_speed import tiled
print(tiled(Path('$G'), 100, Path('$W')))" >> $OUT/prep.log 2>&1
T=$W/tiled_100mbp.fa
P="--model $W/run_base --fasta $T --rc-average --threshold 0.5"
tm() { name=$1; shift; /usr/bin/time -o $W/t -f "%e s wall, max RSS %M KB" "$@" > $W/log 2>&1; echo "$name: $(cat $W/t)" >> $OUT/multi.log; tail -n 2 $W/log >> $OUT/multi_err.log; }
tm "warm-up (compile cache), 1 GPU" env CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q predict $P --compile --out $W/w
tm "1 GPU, compile" env CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q predict $P --compile --out $W/one
tm "2 GPUs, compile" timeout 120 python3 -m torch.distributed.run --nproc-per-node 2 -m genolin -q predict $P --compile --out $W/two
for s in plus minus; do cmp <(tail -n +2 $W/one.$s.bedGraph) <(tail -n +2 $W/two.$s.bedGraph) && echo "same $s" >> $OUT/multi.log; done
cmp <(tail -n +2 $W/one.peaks.bed) <(tail -n +2 $W/two.peaks.bed) && echo "same peaks" >> $OUT/multi.log
rm -f $W/one* $W/two* $W/w.*
tm "1 GPU, eager" env CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m genolin -q predict $P --no-compile --out $W/one
tm "2 GPUs, eager" timeout 120 python3 -m torch.distributed.run --nproc-per-node 2 -m genolin -q predict $P --no-compile --out $W/two
rm -f $W/one* $W/two*
CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "fla" > $OUT/gpu_fla.log 2>&1; echo "rc=$?" >> $OUT/gpu_fla.log
cat $OUT/multi.log; tail -n 4 $OUT/gpu_fla.log
