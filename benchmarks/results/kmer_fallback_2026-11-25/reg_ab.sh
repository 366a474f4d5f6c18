#!/bin/bash
# The epoch-0 model alone (train --max-steps 1 --set lr=1e-9: no step can beat it), old (the quick fit only) against new
# (the quick fit and the converged one, the better on dev kept), then test MCC at the stored threshold.
. /work/main/.venv/bin/activate; rm -rf /tmp/ab; mkdir -p /tmp/ab
for S in /tmp/sets_mo/A_thaliana_251 /tmp/sets_mo/C_elegans_251 /tmp/sets_mo/D_melanogaster_251 /tmp/sets_b/bacillus_251 /tmp/sets_b/cjejuni_251; do
  n=$(basename $S)
  for arm in old new; do
    d=/work/main; [ $arm = old ] && d=/tmp/oldcode
    t=$(date +%s.%N)
    (cd /tmp && PYTHONPATH=$d python -m genolin train --csv $S/train.csv --val-csv $S/dev.csv --preset tiny --device cpu --max-steps 1 --set lr=1e-9 --out /tmp/ab/${n}_$arm > /tmp/ab/${n}_$arm.console 2>&1)
    e=$(python -c "print(f'{$(date +%s.%N) - $t:.1f}')")
    (cd /tmp && PYTHONPATH=$d python -m genolin -q evaluate --model /tmp/ab/${n}_$arm --csv $S/test.csv --out /tmp/ab/${n}_$arm/ev > /dev/null 2>&1)
    python -c "
import json; m=json.load(open('/tmp/ab/${n}_$arm/ev/metrics.json')); lines=open('/tmp/ab/${n}_$arm.console').read().splitlines()
fits=' / '.join(l.split('(')[1].split(')')[0] + ' ' + l.split('validation MCC ')[1].split(';')[0] for l in lines if 'C = ' in l and 'validation MCC' in l)
alt=[l.split('(')[-1].rstrip(')') for l in lines if \"start's alternative\" in l]
print('| $n | $arm | ' + fits + ' | ' + (alt[0] if alt else '') + f' | {100*m[\"mcc\"]:.2f} | {m[\"decision\"]:.3f} | {m[\"auroc\"]:.4f} | $e |')"
  done
done
