#!/bin/bash
# tiny, 7 CPU minutes, with the converged alternative (HEAD): A. thaliana seeds 1 and 2, C. elegans and D. melanogaster seed 0
. /work/main/.venv/bin/activate; rm -rf /tmp/tf2; mkdir -p /tmp/tf2
for run in A_thaliana_251:1 A_thaliana_251:2 C_elegans_251:0 D_melanogaster_251:0; do
  n=${run%:*}; seed=${run#*:}; S=/tmp/sets_mo/$n; R=/tmp/tf2/${n}_s$seed
  genolin train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --seed $seed --max-minutes 7 --out $R > $R.console 2>&1
  genolin -q evaluate --model $R --csv $S/test.csv --out $R/ev > /dev/null 2>&1
  python -c "
import json; m=json.load(open('$R/ev/metrics.json')); lines=open('$R.console').read().splitlines()
alt=[l for l in lines if 'alternative' in l]; done=[l for l in lines if 'done:' in l]
print('| $n | $seed | ' + (alt[0].split(': ')[-1] if alt else '') + ' | ' + (done[0].split('best validation score ')[-1].split(' in ')[0] if done else '') + f' | {100*m[\"mcc\"]:.2f} | {m[\"auroc\"]:.4f} |')"
done
