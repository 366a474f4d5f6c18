# Genome predictions: every track model listed under predict: applied to its genome.


rule predict_genome:
    input:
        model=f"{RESULTS}/models/{{model}}",
        fasta=genome_fasta,
        sizes=f"{RESULTS}/genomes/{{genome}}.sizes",
    output:
        plus=f"{RESULTS}/predictions/{{model}}/{{genome}}.plus.bedGraph",
        minus=f"{RESULTS}/predictions/{{model}}/{{genome}}.minus.bedGraph",
        peaks=f"{RESULTS}/predictions/{{model}}/{{genome}}.peaks.bed",
    params:
        args=predict_args,
        prefix=prediction_prefix,
        device=config["device"],
    log:
        f"{RESULTS}/logs/predict/{{model}}.{{genome}}.log",
    conda:
        ENV
    shell:
        "genolin predict --model {input.model} --fasta {input.fasta} --out {params.prefix} {params.args} "
        "--device {params.device} > {log} 2>&1"
