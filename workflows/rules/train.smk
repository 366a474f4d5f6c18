# Training: one model a dataset; with gpus > 1 the same command runs under torchrun (DDP).


rule train:
    input:
        unpack(train_inputs),
    output:
        model=directory(f"{RESULTS}/models/{{ds}}"),
    params:
        data=train_data_args,
        settings=train_settings,
        launcher=launcher,
        device=config["device"],
        seed=config["seed"],
    resources:
        gpu=train_gpus,
        cpus_per_gpu=8,
        mem_mb=16000,
        runtime=240,
    threads: 2
    log:
        f"{RESULTS}/logs/train/{{ds}}.log",
    conda:
        ENV
    shell:
        "OMP_NUM_THREADS={threads} {params.launcher} train {params.data} {params.settings} "
        "--device {params.device} --seed {params.seed} --out {output.model} > {log} 2>&1"
