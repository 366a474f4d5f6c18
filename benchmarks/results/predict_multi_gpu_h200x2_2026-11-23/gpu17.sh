python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/gpus.txt; python3 -c "import torch, triton, fla; print(torch.__version__, triton.__version__, fla.__version__)" >> $OUT/gpus.txt 2>&1
(CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "fla or new_mixers" > $OUT/test_gpu_fla.log 2>&1; echo "rc=$?" >> $OUT/test_gpu_fla.log;
 true) &
(CUDA_VISIBLE_DEVICES=1 timeout 300 python3 -m genolin -q bench attention --device cuda --variants softmax,elu,favor,hybrid,gla,deltanet,gated_deltanet,linformer,fnet,synthesizer --n 4096 --n 16384 --n 65536 --repeats 5 --softmax-max-n 16384 --out $OUT/attention_h200_mixers > $OUT/bench.log 2>&1; echo "rc=$?" >> $OUT/bench.log) &
W=/tmp/w; mkdir -p $W
(CUDA_VISIBLE_DEVICES=1 python3 -m genolin -q train --fasta .bench_data/ecoli_k12/NC_000913.3.fa.bgz --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base > $OUT/prep.log 2>&1;
 python3 -c "
import sys; sys.path.insert(0,'benchmarks')
from pathlib import Path
from predict_speed import tiled
print(tiled(Path('.bench_data/ecoli_k12/NC_000913.3.fa.bgz'), 100, Path('/tmp/w')))
print(tiled(Path('.bench_data/ecoli_k12/NC_000913.3.fa.bgz'), 1000, Path('/tmp/w')))" >> $OUT/prep.log 2>&1) &
wait
ls -la $W >> $OUT/prep.log
G=$W/tiled_100mbp.fa
python3 .bench_data/rss.py python3 -m genolin -q predict --model $W/run_base --fasta $G --rc-average --out $W/one > $OUT/predict2.log 2>&1
python3 .bench_data/rss.py python3 -m torch.distributed.run --nproc-per-node 2 -m genolin -q predict --model $W/run_base --fasta $G --rc-average --out $W/two >> $OUT/predict2.log 2>&1
for s in plus minus; do cmp $W/one.$s.bedGraph <(sed "s/two/one/" $W/two.$s.bedGraph) && echo "same $s" >> $OUT/predict2.log; done
cmp $W/one.peaks.bed $W/two.peaks.bed && echo "same peaks" >> $OUT/predict2.log
python3 .bench_data/rss.py python3 -m genolin -q predict --model $W/run_base --fasta $G --out $W/nrc >> $OUT/predict2.log 2>&1
python3 .bench_data/rss.py python3 -m torch.distributed.run --nproc-per-node 2 -m genolin -q predict --model $W/run_base --fasta $G --out $W/nrc2 >> $OUT/predict2.log 2>&1
rm -f $W/one* $W/two* $W/nrc*
CUDA_VISIBLE_DEVICES=0 python3 .bench_data/rss.py timeout 240 python3 -m genolin -q predict --model $W/run_base --fasta $W/tiled_1000mbp.fa --out $W/gbp >> $OUT/predict2.log 2>&1
ls -la $W/gbp* >> $OUT/predict2.log 2>&1
grep -h "RSS_RESULT\|same\|rror" $OUT/predict2.log | tail -20
tail -n 3 $OUT/test_gpu_fla.log $OUT/bench.log
