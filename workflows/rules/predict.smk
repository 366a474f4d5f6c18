# Genome predictions: every track model listed under predict: applied to its genome, in one job, or with
# predict_options.scatter one job per contig (`genolin predict --contig`) joined by gather_predictions.py into the
# same three files, or with predict_options.group one job per group of genomes (`genolin predict --out-dir`: one
# start-up and model load a group).

from argparse import Namespace


if GROUP > 1:
    # one job per group of genomes (predict_groups): its genomes' files, a list of them and its summary table
    for _model, _number, _genomes in predict_groups():

        rule:
            name:
                f"predict_group_{_model}_{_number}"
            input:
                model=model_input(Namespace(model=_model)),
                fasta=[GENOMES[g] for g in _genomes],
                sizes=[f"{RESULTS}/genomes/{g}.sizes" for g in _genomes],
            output:
                [f"{RESULTS}/predictions/{_model}/{g}.{suffix}" for g in _genomes
                 for suffix in ("plus.bedGraph", "minus.bedGraph", "peaks.bed")],
                genomes=f"{RESULTS}/predictions/{_model}/groups/{_number}.genomes.tsv",
                summary=f"{RESULTS}/predictions/{_model}/groups/{_number}.summary.tsv",
            params:
                table=genome_table(_genomes),
                args=group_args(_genomes),
                folder=f"{RESULTS}/predictions/{_model}",
                device=config["device"],
                model=model_arg(Namespace(model=_model)),
            log:
                f"{RESULTS}/logs/predict/{_model}.group{_number}.log",
            conda:
                ENV
            shell:
                "printf '%b' {params.table:q} > {output.genomes} && genolin predict --model {params.model} "
                "--genomes {output.genomes} --out-dir {params.folder} --summary {output.summary} {params.args} "
                "--device {params.device} > {log} 2>&1"

elif not SCATTER:

    rule predict_genome:
        input:
            model=model_input,
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
            model=model_arg,
        log:
            f"{RESULTS}/logs/predict/{{model}}.{{genome}}.log",
        conda:
            ENV
        shell:
            "genolin predict --model {params.model} --fasta {input.fasta} --out {params.prefix} {params.args} "
            "--device {params.device} > {log} 2>&1"

else:

    rule predict_contig:
        input:
            model=model_input,
            fasta=genome_fasta,
            sizes=f"{RESULTS}/genomes/{{genome}}.sizes",
        output:
            plus=temp(f"{RESULTS}/predictions/{{model}}/{{genome}}.parts/{{part}}.plus.bedGraph"),
            minus=temp(f"{RESULTS}/predictions/{{model}}/{{genome}}.parts/{{part}}.minus.bedGraph"),
            peaks=temp(f"{RESULTS}/predictions/{{model}}/{{genome}}.parts/{{part}}.peaks.bed"),
        wildcard_constraints:
            part=r"\d+",
        params:
            args=predict_args,
            prefix=prediction_prefix,
            device=config["device"],
            model=model_arg,
            contig=part_contig,
        log:
            f"{RESULTS}/logs/predict/{{model}}.{{genome}}.{{part}}.log",
        conda:
            ENV
        shell:
            "genolin predict --model {params.model} --fasta {input.fasta} --contig {params.contig} "
            "--out {params.prefix} {params.args} --device {params.device} > {log} 2>&1"

    rule gather_predictions:
        input:
            parts=contig_part_peaks,
        output:
            plus=f"{RESULTS}/predictions/{{model}}/{{genome}}.plus.bedGraph",
            minus=f"{RESULTS}/predictions/{{model}}/{{genome}}.minus.bedGraph",
            peaks=f"{RESULTS}/predictions/{{model}}/{{genome}}.peaks.bed",
        params:
            prefix=prediction_prefix,
            parts=contig_part_prefixes,
        log:
            f"{RESULTS}/logs/predict/{{model}}.{{genome}}.gather.log",
        conda:
            ENV
        script:
            "../scripts/gather_predictions.py"
