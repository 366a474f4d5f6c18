python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
python3 -c "import scipy, sklearn; print('scipy', scipy.__version__)" > $OUT/env.txt 2>&1; nvidia-smi -L >> $OUT/env.txt; git log --oneline -1 >> $OUT/env.txt 2>&1
W=/tmp/w; mkdir -p $W
timeout 200 python3 benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --formats none,bedgraph --no-reference --work $W --out $OUT/predict_speed_h200_100mbp_eager > $OUT/eager.log 2>&1
timeout 200 python3 benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --formats none,bedgraph --no-reference --compile --work $W --out $OUT/predict_speed_h200_100mbp_compile > $OUT/compile.log 2>&1
tail -n 14 $OUT/*.log; cat $OUT/env.txt
