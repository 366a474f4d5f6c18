# Explanations: the top predicted promoters of every predicted genome (explain.top calls by score, +-flank_bp
# around each, on the call's strand, seen inside explain.context_bp of genome) through `genolin explain --method ism
# --motifs`: per-base ISM (npz, bigWig), logos, and the TF-MoDISco motifs matched to known promoter elements,
# which the summary lists.


rule explain_top_promoters:
    input:
        model=model_input,
        fasta=genome_fasta,
        peaks=f"{RESULTS}/predictions/{{model}}/{{genome}}.peaks.bed",
        sizes=f"{RESULTS}/genomes/{{genome}}.sizes",
    output:
        regions=f"{RESULTS}/explain/{{model}}/{{genome}}/regions.bed",
        scores=f"{RESULTS}/explain/{{model}}/{{genome}}/scores.tsv",
        motifs=f"{RESULTS}/explain/{{model}}/{{genome}}/motifs.tsv",
    params:
        top=lambda wildcards: config["explain"]["top"],
        flank=lambda wildcards: config["explain"]["flank_bp"],
        method=lambda wildcards: config["explain"]["method"],
        domain=lambda wildcards: config["explain"]["domain"],
        context=lambda wildcards: ("" if config["explain"].get("context_bp") is None
                                   else f"--context {config['explain']['context_bp']}"),
        out=lambda wildcards, output: os.path.dirname(output.motifs),
        device=config["device"],
        model=model_arg,
    log:
        f"{RESULTS}/logs/explain/{{model}}.{{genome}}.log",
    conda:
        ENV
    shell:
        # a model that called nothing leaves nothing to explain: empty tables, said in the log
        "python workflows/scripts/top_regions.py {input.peaks} {input.sizes} {params.top} {params.flank} "
        "{output.regions} > {log} 2>&1 && "
        "if [ -s {output.regions} ]; then "
        "genolin explain --model {params.model} --fasta {input.fasta} --regions {output.regions} "
        "--method {params.method} {params.context} --motifs --domain {params.domain} --device {params.device} --out {params.out} >> {log} 2>&1; "
        "else echo 'no promoter calls to explain' >> {log}; "
        "printf 'id\\tlength\\tlog_odds\\tmax_importance\\n' > {output.scores}; "
        "printf 'motif\\tsign\\tseqlets\\tconsensus\\tbest_known_match\\ttomtom_p\\tsignificant\\n' > {output.motifs}; fi"
