# Genomes: validate and index every FASTA (writes its contig sizes), and cache its k-mer token arrays.


rule index_genome:
    input:
        fasta=genome_fasta,
    output:
        sizes=f"{RESULTS}/genomes/{{genome}}.sizes",
    log:
        f"{RESULTS}/logs/index/{{genome}}.log",
    conda:
        ENV
    shell:
        "genolin index --fasta {input.fasta} --sizes {output.sizes} > {log} 2>&1"


rule tokenize_genome:
    input:
        fasta=genome_fasta,
        sizes=f"{RESULTS}/genomes/{{genome}}.sizes",
    output:
        tokens=f"{RESULTS}/tokens/{{genome}}.k{{k}}.npz",
    log:
        f"{RESULTS}/logs/tokenize/{{genome}}.k{{k}}.log",
    conda:
        ENV
    shell:
        "genolin tokenize --fasta {input.fasta} --k {wildcards.k} --stride 1 --out {output.tokens} > {log} 2>&1"
