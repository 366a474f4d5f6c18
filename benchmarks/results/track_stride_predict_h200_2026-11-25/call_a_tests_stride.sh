#!/bin/bash
# Session 2026-11-25 (12th), call A: GPU tests of the current code (eager inference without custom ops, 35db92d),
# beside the base track preset at stride 2 vs stride 4, leave one genome out, seeds 0 and 1 (12 trainings at once).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH OMP_NUM_THREADS=1
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; git log -1 --format=%H) > $OUT/machine.txt
S=/tmp/sh; mkdir -p $S/ecoli_k12 $S/bacteria/BACILLUS $S/bacteria/CJEJUNI_2
ln -sf $PWD/data/ecoli_k12/NC_000913.3.fa.bgz* $S/ecoli_k12/; ln -sf $PWD/.bench_data/bact/regulondb_10.9_tss.bed $S/ecoli_k12/
ln -sf $PWD/.bench_data/bact/BACILLUS.* $S/bacteria/BACILLUS/; ln -sf $PWD/.bench_data/bact/CJEJUNI_2.* $S/bacteria/CJEJUNI_2/
ls -lR $S > $OUT/layout.txt
B="python3 benchmarks/promoter_tracks.py --shared $S --preset base --windows 8192 --mixers hybrid --tokens 5e7 --tokens-per-step 65536 --max-minutes 5.5 --no-eukaryotes --parallel 3"
R=/tmp/st; mkdir -p $R
for seed in 0 1; do
  timeout 500 $B --stride 2 --set tolerance_bins=12 --seed $seed --work $R/s2_$seed --out $R/stride2_seed$seed > $R/stride2_seed$seed.log 2>&1 &
  timeout 500 $B --stride 4 --set tolerance_bins=6 --seed $seed --work $R/s4_$seed --out $R/stride4_seed$seed > $R/stride4_seed$seed.log 2>&1 &
done
sleep 30
timeout 480 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "not fla" tests/test_norm_conv.py tests/test_triton.py > $OUT/gpu_tests.log 2>&1; echo "rc=$?" >> $OUT/gpu_tests.log
tail -3 $OUT/gpu_tests.log
wait
cd $R && (find . -name metrics.jsonl -o -name log.txt -o -name metrics.json -o -name config.json; ls *.json *.md *.log) | tar czf $OUT/stride_runs.tgz -T -
cp $R/*.md $R/*.json $OUT/ 2>/dev/null
for f in $R/stride*.md; do echo "== $f"; grep "| 8,192" $f; done
tail -n 4 $R/*.log
