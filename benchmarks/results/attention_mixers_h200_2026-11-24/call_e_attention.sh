#!/bin/bash
# Session 2026-11-24b, call E: `genolin bench attention` on the H200 for the new mixers (fla kernels for gla and the
# delta rules), then the causal kernels at longer N.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import fla, triton, torch; print('fla', fla.__version__, 'triton', triton.__version__, 'torch', torch.__version__)" | tee $OUT/versions.txt
S=$(date +%s)
timeout 380 python3 -m genolin bench attention --device cuda --variants gla,deltanet,gated_deltanet --n 4096 --n 16384 --n 65536 \
  --softmax-max-n 16384 --out $OUT/attention_scans_h200 > $OUT/scans.log 2>&1; echo "rc=$? $(( $(date +%s) - S )) s" >> $OUT/scans.log
timeout 100 python3 -m genolin bench attention --device cuda --variants elu,linformer,fnet,synthesizer --n 4096 --n 16384 --n 65536 \
  --softmax-max-n 16384 --out $OUT/attention_baselines_h200 > $OUT/baselines.log 2>&1; echo "rc=$? $(( $(date +%s) - S )) s" >> $OUT/baselines.log
R=$(( 570 - ($(date +%s) - S) - 5 ))
[ $R -gt 30 ] && timeout $R python3 benchmarks/attention_kernels.py --only "causal" --out $OUT/kernels_causal > $OUT/causal.log 2>&1; echo "rc=$?" >> $OUT/causal.log
tail -n 25 $OUT/scans.log; tail -n 20 $OUT/baselines.log; tail -n 20 $OUT/causal.log
