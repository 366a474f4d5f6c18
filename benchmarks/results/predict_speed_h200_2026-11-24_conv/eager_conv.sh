#!/bin/bash
# Session 2026-11-24 (7th): eager CUDA prediction (no --compile), base model, 20 Mbp tiled from E. coli, before
# (.bench_data/old: the package before the channels-last convolution on CUDA) and after, alternating; then GPU tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
for r in 1 2; do
  for v in old new; do
    if [ $v = old ]; then export PYTHONPATH=/tmp/site:$PWD/.bench_data/old:$PWD; else export PYTHONPATH=/tmp/site:$PWD; fi
    python -c "import genolin.model as m; print('$v', m.__file__)"
    python benchmarks/predict_speed.py --preset base --device cuda --mbp 20 --formats bedgraph --no-reference \
      --work /tmp/ps_$v --out $OUT/eager_${v}_$r 2>&1 | grep -E "^\| (no|yes)" 
  done
done
export PYTHONPATH=/tmp/site:$PWD
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "short_conv or genome_prediction or streaming" > $OUT/gpu_tests_conv.log 2>&1; echo rc=$? >> $OUT/gpu_tests_conv.log; tail -2 $OUT/gpu_tests_conv.log
