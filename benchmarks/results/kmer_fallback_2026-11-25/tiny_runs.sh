#!/bin/bash
# tiny, 7 CPU minutes, seed 0, with the converged alternative (HEAD), then test scored at the stored threshold
. /work/main/.venv/bin/activate; rm -rf /tmp/tf; mkdir -p /tmp/tf
for S in /tmp/sets_mo/A_thaliana_251 /tmp/sets_b/cjejuni_251; do
  n=$(basename $S); R=/tmp/tf/$n
  genolin train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --seed 0 --max-minutes 7 --out $R > /tmp/tf/$n.console 2>&1
  genolin -q evaluate --model $R --csv $S/test.csv --out $R/ev > /dev/null 2>&1
  python -c "
import json; m=json.load(open('$R/ev/metrics.json')); lines=open('/tmp/tf/$n.console').read().splitlines()
alt=[l for l in lines if \"alternative\" in l]; best=[l for l in lines if 'best' in l.lower()][-1:]
print('| $n | ' + (alt[0].split(': ')[-1] if alt else '') + f' | {100*m[\"mcc\"]:.2f} | {m[\"auroc\"]:.4f} |')"
  grep -i "epoch\|stopp\|best" /tmp/tf/$n.console | tail -3
done
