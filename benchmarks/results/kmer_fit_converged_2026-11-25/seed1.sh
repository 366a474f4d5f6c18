#!/bin/bash
. /work/main/.venv/bin/activate
for S in /tmp/sets_b/bacillus_251 /tmp/sets_b/cjejuni_251; do
  n=$(basename $S)
  for arm in old new; do
    d=/work/main; [ $arm = old ] && d=/tmp/oldcode
    R=/tmp/s1/${n}_$arm
    (cd /tmp && PYTHONPATH=$d python -m genolin -q train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --seed 1 --max-minutes 7 --out $R > /tmp/s1_${n}_$arm.log 2>&1
     PYTHONPATH=$d python -m genolin -q evaluate --model $R --csv $S/test.csv --out $R/ev >> /tmp/s1_${n}_$arm.log 2>&1)
    python -c "
import json; m=json.load(open('$R/ev/metrics.json')); print('$n $arm seed1', round(100*m['mcc'],2), round(m['auroc'],4))"
  done
done
