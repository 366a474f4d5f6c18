#!/bin/bash
# Round 3 on one H200: presets alone (steps per minute), then recipe knobs (18 trainings at once) beside the GPU tests.
export OMP_NUM_THREADS=2
R=/tmp/r3; mkdir -p $R
D=.bench_data
G="--fasta $D/ecoli_k12/NC_000913.3.fa.bgz --tss $D/ecoli_k12/regulondb_10.9_tss.bed --fasta $D/bacteria/BACILLUS/BACILLUS.fasta.gz --tss $D/bacteria/BACILLUS/BACILLUS.bed --fasta $D/bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz --tss $D/bacteria/CJEJUNI_2/CJEJUNI_2.bed"
for p in small base; do
  python3 -m genolin -q train $G --preset $p --set val_every_steps=150 --max-minutes 1 --device cuda --out $R/alone_$p > $R/alone_$p.log 2>&1
  echo "== $p alone"; cat $R/alone_$p/metrics.jsonl | python3 -c "import sys,json; [print(r['step'], round(r['seconds'],1), round(r['tokens_per_s'])) for r in map(json.loads, sys.stdin)]"
done
B="python3 benchmarks/promoter_tracks.py --shared .bench_data --preset small --tokens 5e7 --tokens-per-step 65536 --max-minutes 5 --windows 8000 --mixers hybrid --no-eukaryotes --parallel 3"
i=0
while read -r v; do
  i=$((i+1))
  $B $v --work $R/k$i --out $R/knob$i > $R/knob$i.log 2>&1 &
done <<'V'
--set tolerance_bins=12 --set focal_gamma=2
--set tolerance_bins=12 --set n_layers=8
--set tolerance_bins=12 --set d_model=256
--stride 4 --set tolerance_bins=6
--set tolerance_bins=25
--set tolerance_bins=12 --set d_model=256 --set n_layers=6 --set n_heads=8
V
python3 -m pytest -q tests/test_gpu.py > $R/gpu_tests.log 2>&1; tail -3 $R/gpu_tests.log
wait
cd $R && (find . -name metrics.jsonl -o -name log.txt -o -name metrics.json; ls *.json *.md *.log) | tar czf $OUT/round3.tgz -T -
for f in knob*.md; do grep -A1 "^\`python" $f | head -1; grep "| 8,000" $f; done
