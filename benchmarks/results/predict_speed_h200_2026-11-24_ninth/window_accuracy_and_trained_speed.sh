#!/bin/bash
# Session 2026-11-24 (9th), call H: base track models trained 4 min each (2 at once) on two bacteria, the third scored
# with windows of 8, 32 and 64 kb (accuracy of --window-bp); GPU tests meanwhile; then prediction speed with a
# trained model (realistic bedGraph output) at the training window and at 32 kb.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pyfaidx*.whl .whl/biopython*.whl .whl/pybigwig*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH OMP_NUM_THREADS=4
B=.bench_data/bact; E="--fasta data/ecoli_k12/NC_000913.3.fa.bgz --tss $B/regulondb_10.9_tss.bed"
BA="--fasta $B/BACILLUS.fasta.gz --tss $B/BACILLUS.bed"; CJ="--fasta $B/CJEJUNI_2.fasta.gz --tss $B/CJEJUNI_2.bed"
timeout 330 python3 -m genolin -q train $E $BA --preset base --max-minutes 4 --device cuda --out /tmp/tr/hold_CJ > $OUT/train_CJ.log 2>&1 &
timeout 330 python3 -m genolin -q train $E $CJ --preset base --max-minutes 4 --device cuda --out /tmp/tr/hold_BA > $OUT/train_BA.log 2>&1 &
(timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "not fla" tests/test_norm_conv.py tests/test_triton.py > $OUT/gpu_tests.log 2>&1; echo "rc=$?" >> $OUT/gpu_tests.log) &
wait
tail -n 2 $OUT/gpu_tests.log; tail -n 2 $OUT/train_CJ.log $OUT/train_BA.log
for w in 8192 32768 65536; do
  timeout 100 python3 -m genolin -q evaluate --model /tmp/tr/hold_CJ $CJ --rc-average --window-bp $w --device cuda --out /tmp/ev/CJ_$w > /tmp/ev_CJ_$w.log 2>&1 &
  timeout 100 python3 -m genolin -q evaluate --model /tmp/tr/hold_BA $BA --rc-average --window-bp $w --device cuda --out /tmp/ev/BA_$w > /tmp/ev_BA_$w.log 2>&1 &
done; wait
python3 - > $OUT/window_accuracy.json <<'PY'
import json, glob, os
out = {}
for p in sorted(glob.glob("/tmp/ev/*/metrics.json")):
    m = json.load(open(p)); out[os.path.basename(os.path.dirname(p))] = {"pooled": m["pooled"], "calls": m["calls"], "scoring": m.get("scoring")}
print(json.dumps(out, indent=1))
PY
python3 -c "
import json; d=json.load(open('$OUT/window_accuracy.json'))
for k,v in d.items(): print(k, 'auprc %.4f auroc %.4f f1 %.4f' % (v['pooled']['auprc'], v['pooled']['auroc'], v['pooled']['f1']), 'calls', v['calls'].get('calls'), 'recall100 %.4f' % v['calls'].get('recall_100bp', 0))"
(cd /tmp/tr && tar czf $OUT/runs_metrics.tgz */metrics.jsonl */config.json)
for w in 0 32768; do
  a=""; [ $w -gt 0 ] && a="--window-bp $w"
  timeout 150 python3 benchmarks/predict_speed.py --model /tmp/tr/hold_CJ --device cuda --mbp 100 --compile --formats bedgraph \
    --no-reference --work /tmp/ps $a --out $OUT/predict_speed_trained_w$w > $OUT/ps_$w.log 2>&1; echo "rc=$?" >> $OUT/ps_$w.log
  grep -E "^(rc|CLI)" $OUT/ps_$w.log
done
