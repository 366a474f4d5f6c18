# Genomes: validate and index every FASTA (writes its contig sizes; training and prediction read it through the index).
# A checkpoint: with predict_options.scatter the contig list it writes decides the prediction jobs.


checkpoint index_genome:
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

