#!/bin/bash
# Session 2026-11-25 (12th), call B: genolin predict, 102 Mbp, base track model at stride 2 and at stride 4 (trained
# 1.2 min each on E. coli, at once), eager (no custom ops since 35db92d) and compiled; Triton GEMM templates.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
[ -d /tmp/st ] && (cd /tmp/st && tar czf $OUT/call_a_stride.tgz *.md *.json *.log $(find . -name metrics.jsonl -o -name metrics.json -o -name config.json))
(nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; git log -1 --format=%H) > /tmp/machine.txt
W=/tmp/w; mkdir -p $W /tmp/r; T0=$(date +%s)
E="--fasta data/ecoli_k12/NC_000913.3.fa.bgz --tss .bench_data/bact/regulondb_10.9_tss.bed --preset base --max-minutes 1.2 --device cuda"
timeout 130 python3 -m genolin -q train $E --out $W/run_s2 > /tmp/train_s2.log 2>&1 &
timeout 130 python3 -m genolin -q train $E --set stride=4 --set tolerance_bins=6 --out $W/run_s4 > /tmp/train_s4.log 2>&1 &
wait; echo "trained $(( $(date +%s) - T0 )) s" >> /tmp/steps.txt
PS="python3 benchmarks/predict_speed.py --device cuda --mbp 100 --no-reference --window-bp 32768 --work $W"
timeout 150 $PS --model $W/run_s2 --formats bedgraph --out /tmp/r/ps_s2_eager > /tmp/ps_s2_eager.log 2>&1; echo "s2 eager rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/steps.txt
timeout 150 $PS --model $W/run_s2 --compile --formats bedgraph --out /tmp/r/ps_s2_compiled > /tmp/ps_s2_comp.log 2>&1; echo "s2 compiled rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/steps.txt
timeout 150 $PS --model $W/run_s4 --compile --formats none,bedgraph --out /tmp/r/ps_s4_compiled > /tmp/ps_s4_comp.log 2>&1; echo "s4 compiled rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/steps.txt
timeout 100 $PS --model $W/run_s4 --formats bedgraph --out /tmp/r/ps_s4_eager > /tmp/ps_s4_eager.log 2>&1; echo "s4 eager rc=$? $(( $(date +%s) - T0 )) s" >> /tmp/steps.txt
cp /tmp/*.log /tmp/steps.txt /tmp/machine.txt /tmp/r/ 2>/dev/null
(cd /tmp/r && tar czf $OUT/call_b.tgz .)
cat /tmp/steps.txt; grep -h "^| \(yes\|no\)" /tmp/r/*.md
