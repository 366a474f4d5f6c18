# Labelled sets: validated and written as train/dev/test TSVs (split when the config gives one file).


rule split_dataset:
    input:
        split_inputs,
    output:
        train=f"{RESULTS}/datasets/{{ds}}/train.tsv",
        dev=f"{RESULTS}/datasets/{{ds}}/dev.tsv",
        test=f"{RESULTS}/datasets/{{ds}}/test.tsv",
        summary=f"{RESULTS}/datasets/{{ds}}/summary.json",
    params:
        args=split_args,
        folder=output_folder,
    log:
        f"{RESULTS}/logs/datasets/{{ds}}.log",
    conda:
        ENV
    shell:
        "genolin split {params.args} --out-dir {params.folder} > {log} 2>&1"
