#!/bin/bash
# Round 2 of benchmarks/promoter_tracks.py on one H200: 18 trainings at once.
export OMP_NUM_THREADS=2
R=/tmp/r2; mkdir -p $R
B="python3 benchmarks/promoter_tracks.py --shared .bench_data --preset small --tokens 5e7 --tokens-per-step 65536 --max-minutes 6.5"
$B --windows 1000,8000,32000,100000 --mixers hybrid --parallel 12 --work $R/w --out $R/windows > $R/windows.log 2>&1 &
$B --windows 8000 --mixers hybrid --set tolerance_bins=12 --no-eukaryotes --parallel 3 --work $R/t --out $R/tolerance12 > $R/tolerance12.log 2>&1 &
$B --windows 8000 --mixers favor --no-eukaryotes --parallel 3 --work $R/f --out $R/favor > $R/favor.log 2>&1 &
( while sleep 60; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; done ) > $R/smi.log &
wait %1 %2 %3
kill %4
cd $R && (find . -name metrics.jsonl -o -name log.txt -o -name metrics.json; ls *.json *.md *.png *.log) | tar czf $OUT/round2.tgz -T -
cat *.md; tail -3 smi.log; tail -5 windows.log
