#!/bin/bash
# tiny, 7 CPU minutes, seed 0, then dev and test scored at the stored (max-MCC on dev) threshold and at 0.5
. /work/main/.venv/bin/activate
for S in /tmp/sets_mo/A_thaliana_251 /tmp/sets_mo/C_elegans_251 /tmp/sets_mo/D_melanogaster_251 /tmp/sets_b/bacillus_251 /tmp/sets_b/cjejuni_251; do
  n=$(basename $S); R=/tmp/rrn/$n
  genolin -q train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --seed 0 --max-minutes 7 --out $R > /tmp/rrn_$n.log 2>&1
  for split in dev test; do
    genolin -q evaluate --model $R --csv $S/$split.csv --out $R/eval_${split}_stored >> /tmp/rrn_$n.log 2>&1
    genolin -q evaluate --model $R --csv $S/$split.csv --threshold 0.5 --out $R/eval_${split}_half >> /tmp/rrn_$n.log 2>&1
  done
  echo "$n done $(date)"
done
