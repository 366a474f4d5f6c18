# usage: cmp.sh REPS dir1 dir2 ...  (each a source tree; runs genolin predict from it, interleaved)
reps=$1; shift
for r in $(seq $reps); do for d in "$@"; do
  s=$(date +%s.%N); PYTHONPATH=$d python -c "import sys; sys.argv=['genolin','-q','predict','--model','/tmp/ps7/run_tiny','--fasta','/work/main/data/ecoli_k12/NC_000913.3.fa.bgz','--device','cpu','--out','/tmp/pc']; from genolin.cli import main; main()" $EXTRA; e=$(date +%s.%N)
  echo "$d $(echo "$e - $s" | bc)"
done; done | sort | awk '{a[$1]=a[$1]" "$2} END {for (k in a) print k, a[k]}'
