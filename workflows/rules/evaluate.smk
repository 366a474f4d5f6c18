# Evaluation: sequence models on their test split; track models on each genome under evaluate: (the training
# genome on its held-out contig ends only).


rule evaluate:
    input:
        unpack(evaluate_inputs),
    output:
        metrics=f"{RESULTS}/eval/{{ds}}/{{target}}/metrics.json",
        report=f"{RESULTS}/eval/{{ds}}/{{target}}/report.md",
        roc=report(
            f"{RESULTS}/eval/{{ds}}/{{target}}/roc.png",
            category="ROC curves",
            labels={"model": "{ds}", "data": "{target}"},
        ),
        pr=report(
            f"{RESULTS}/eval/{{ds}}/{{target}}/pr.png",
            category="Precision-recall curves",
            labels={"model": "{ds}", "data": "{target}"},
        ),
    params:
        args=evaluate_args,
        folder=output_folder,
        device=config["device"],
    log:
        f"{RESULTS}/logs/evaluate/{{ds}}.{{target}}.log",
    conda:
        ENV
    shell:
        "genolin evaluate --model {input.model} {params.args} --device {params.device} "
        "--out {params.folder} > {log} 2>&1"
