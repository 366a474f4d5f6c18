python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
W=/tmp/w; mkdir -p $W
G=.bench_data/ecoli_k12/NC_000913.3.fa.bgz
timeout 60 python3 -m genolin -q train --fasta data/ecoli_k12/NC_000913.3.fa.bgz --tss data/ecoli_k12/gene_starts.bed --preset base --max-steps 1 --device cuda --out $W/run_base
timeout 120 python3 .bench_data/compile_check.py $W/run_base $G 2>&1 | grep -v "^W1\|^E1" | tail -8 | tee $OUT/compile_check_cudagraphs.log
timeout 260 python3 benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --formats bedgraph --no-reference --compile --work $W --out $OUT/ps_compile_cudagraphs > $OUT/ps_compile_cudagraphs.log 2>&1
tail -12 $OUT/ps_compile_cudagraphs.log
