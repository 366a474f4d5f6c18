#!/bin/bash
# the in-model k-mer regression alone (train --max-steps 1: the epoch-0 model kept), old fit (max_iter 500) vs new (tol 1e-6), test MCC
. /work/main/.venv/bin/activate
for S in /tmp/sets_mo/A_thaliana_251 /tmp/sets_mo/C_elegans_251 /tmp/sets_mo/D_melanogaster_251 /tmp/sets_b/bacillus_251 /tmp/sets_b/cjejuni_251 /tmp/sets_b/ecoli_251 /tmp/gue15k/prom_core_all /tmp/gue15k/prom_core_notata; do
  n=$(basename $S)
  for arm in old new; do
    d=/work/main; [ $arm = old ] && d=/tmp/oldcode
    t=$(date +%s.%N)
    (cd /tmp && PYTHONPATH=$d python -m genolin train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --max-steps 1 --out /tmp/ab/${n}_$arm > /tmp/ab/${n}_$arm.console 2>&1)
    e=$(python -c "print(f'{$(date +%s.%N) - $t:.1f}')")
    (cd /tmp && PYTHONPATH=$d python -m genolin -q evaluate --model /tmp/ab/${n}_$arm --csv $S/test.csv --out /tmp/ab/${n}_$arm/ev > /dev/null 2>&1)
    python -c "
import json; m=json.load(open('/tmp/ab/${n}_$arm/ev/metrics.json')); c=[l for l in open('/tmp/ab/${n}_$arm.console') if 'logistic regression' in l][0].split('(')[1].split(')')[0]
print('| $n | $arm | ' + c + f' | {100*m[\"mcc\"]:.2f} | {m[\"decision\"]:.3f} | {m[\"auroc\"]:.4f} | $e |')"
  done
done
