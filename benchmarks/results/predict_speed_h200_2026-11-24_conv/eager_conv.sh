#!/bin/bash
# Session 2026-11-24 (7th): eager CUDA prediction (no --compile), base model, 20 Mbp tiled from E. coli, before
# (a copy of the repository whose package is .bench_data/old: before the channels-last convolution on CUDA) and
# after, alternating.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
NEW=$PWD; OLD=/tmp/oldrepo
rm -rf $OLD && mkdir -p $OLD && cp -r benchmarks data pyproject.toml $OLD/ && cp -r .bench_data/old/genolin $OLD/genolin
for r in 1 2; do
  for v in old new; do
    if [ $v = old ]; then cd $OLD; else cd $NEW; fi
    export PYTHONPATH=/tmp/site:$PWD
    python -c "import genolin.model as m; print('$v', m.__file__, hasattr(m, 'CHANNELS_LAST_CONV_MAX_TOKENS'))"
    python benchmarks/predict_speed.py --preset base --device cuda --mbp 20 --formats bedgraph --no-reference \
      --work /tmp/ps_$v --out $OUT/eager_${v}_$r 2>&1 | grep -E "^\| (no|yes)"
  done
done
cd $NEW
