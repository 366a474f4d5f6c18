set -x
G=/work/shared/data/gue/prom_core_tata
S=/work/shared/data
time genolin train --csv $G/train.csv --val-csv $G/dev.csv --out gue_final --preset tiny
time genolin evaluate --model gue_final --csv $G/test.csv --out gue_final/test
time genolin train --fasta $S/ecoli_k12/NC_000913.3.fa.bgz --tss $S/ecoli_k12/regulondb_10.9_tss.bed --out ecoli_final --preset tiny
time genolin evaluate --model ecoli_final --fasta $S/bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz --tss $S/bacteria/CJEJUNI_2/CJEJUNI_2.bed --out ecoli_final/eval_cjejuni --rc-average
time genolin predict --model ecoli_final --fasta $S/bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz --out ecoli_final/cjejuni --rc-average
