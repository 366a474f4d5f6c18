# Helpers of the rules: config lookups and command-line fragments (no logic in lambdas).

import os
import shlex

from snakemake.exceptions import WorkflowError

RESULTS = config["results"]
DATASETS = config["datasets"]
GENOMES = config["genomes"]
CIRCULAR = config["circular"]
READY = config["ready_models"]
ENV = "../envs/genolin.yaml"


def training_genomes(d):
    """The genome names a track dataset trains on (genome: one, or genomes: several)."""
    return list(d["genomes"]) if "genomes" in d else [d["genome"]]


def tss_of(d, genome):
    """The TSS BED of one training genome: from the tss: mapping, else the one BED given for all."""
    return d["tss"][genome] if isinstance(d["tss"], dict) else d["tss"]


def _check_config():
    """What the schema cannot say: names that must refer to each other."""
    for ds, d in DATASETS.items():
        if d["task"] == "track":
            for genome in [*training_genomes(d), *d["evaluate"]]:
                if genome not in GENOMES:
                    raise WorkflowError(f"dataset {ds}: genome {genome!r} is not listed under genomes:")
            if isinstance(d["tss"], dict) and set(d["tss"]) != set(training_genomes(d)):
                raise WorkflowError(f"dataset {ds}: tss: names {sorted(d['tss'])}, the training genomes are "
                                    f"{training_genomes(d)}")
            if not isinstance(d["tss"], dict) and len(training_genomes(d)) > 1 and not d["evaluate"]:
                raise WorkflowError(f"dataset {ds}: one tss: BED for several genomes; list the genomes to evaluate "
                                    f"under evaluate: with a BED each")
    for genome in CIRCULAR:
        if genome not in GENOMES:
            raise WorkflowError(f"circular: genome {genome!r} is not listed under genomes:")
    for ds, d in DATASETS.items():
        alls = [CIRCULAR.get(g) == "all" for g in (training_genomes(d) if d["task"] == "track" else [])]
        if any(alls) and not all(alls):
            raise WorkflowError(f"dataset {ds}: circular: 'all' for one of several training genomes would make every "
                                f"genome's contigs circular; list the contig names instead")
    for genome, models in config["predict"].items():
        if genome not in GENOMES:
            raise WorkflowError(f"predict: genome {genome!r} is not listed under genomes:")
        for model in models:
            if model not in READY and DATASETS.get(model, {}).get("task") != "track":
                raise WorkflowError(f"predict: {model!r} is not a track dataset or a model under ready_models:")
    for model in READY:
        if model in DATASETS:
            raise WorkflowError(f"ready_models: {model!r} is also a dataset; name one of them otherwise")


_check_config()


def sequence_datasets():
    return [ds for ds, d in DATASETS.items() if d["task"] == "sequence"]


def track_datasets():
    return [ds for ds, d in DATASETS.items() if d["task"] == "track"]


def evaluation_targets(ds):
    """Where a dataset's model is evaluated: 'test' for sequences, genome names for tracks."""
    d = DATASETS[ds]
    return ["test"] if d["task"] == "sequence" else list(d["evaluate"]) or training_genomes(d)


def all_targets():
    targets = [f"{RESULTS}/report/summary.md"]
    for genome in GENOMES:
        targets.append(f"{RESULTS}/genomes/{genome}.sizes")
    for genome, models in config["predict"].items():
        targets += [f"{RESULTS}/predictions/{model}/{genome}.peaks.bed" for model in models]
    return targets + explain_files()


def explain_files():
    """The motif tables of explain_top_promoters, one per predicted (model, genome); none with explain.top 0."""
    if not config["explain"]["top"]:
        return []
    return [f"{RESULTS}/explain/{m}/{g}/motifs.tsv" for g, models in config["predict"].items() for m in models]


def metrics_files():
    return [f"{RESULTS}/eval/{ds}/{target}/metrics.json" for ds in DATASETS for target in evaluation_targets(ds)]


def model_input(wildcards):
    """A trained dataset's run directory, for the rules that apply it; nothing for a bundled model (ready_models)."""
    return [] if wildcards.model in READY else [f"{RESULTS}/models/{wildcards.model}"]


def model_arg(wildcards):
    """genolin's --model of a predicted model: a trained dataset's run directory, or a bundled model's name."""
    return wildcards.model if wildcards.model in READY else f"{RESULTS}/models/{wildcards.model}"


def genome_fasta(wildcards):
    return GENOMES[wildcards.genome]


# --- datasets ---


def split_inputs(wildcards):
    d = DATASETS[wildcards.ds]
    files = [d["labelled"]] if "labelled" in d else [d["train"], d["dev"], d["test"]]
    return files + ([d["labels"]] if "labels" in d else [])


def split_args(wildcards):
    d = DATASETS[wildcards.ds]
    files = [d["labelled"]] if "labelled" in d else [d["train"], d["dev"], d["test"]]
    args = [f"--input {shlex.quote(f)}" for f in files]
    if "labels" in d:
        args.append(f"--labels {shlex.quote(d['labels'])}")
    args.append(f"--dev-fraction {d['dev_fraction']} --test-fraction {d['test_fraction']} --seed {config['seed']}")
    return " ".join(args)


# --- training ---


def train_inputs(wildcards):
    d = DATASETS[wildcards.ds]
    if d["task"] == "sequence":
        folder = f"{RESULTS}/datasets/{wildcards.ds}"
        return {"train": f"{folder}/train.tsv", "dev": f"{folder}/dev.tsv"}
    genomes = training_genomes(d)
    beds = [tss_of(d, g) for g in genomes] if isinstance(d["tss"], dict) else [d["tss"]]
    return {"fasta": [GENOMES[g] for g in genomes], "sizes": [f"{RESULTS}/genomes/{g}.sizes" for g in genomes],
            "tss": beds}


def circular_arg(genomes):
    """--circular for the genomes' circular contigs (config circular:), or nothing. 'all' stands for every contig
    of the genomes given (_check_config allows it for several training genomes only when each is 'all')."""
    names = [CIRCULAR[g] for g in genomes if g in CIRCULAR]
    if not names:
        return ""
    if "all" in names:
        return "--circular all"
    return f"--circular {shlex.quote(','.join(n for listed in names for n in listed))}"


def train_data_args(wildcards, input):
    """Sequences: train and dev sets. Tracks: --fasta G --tss BED per genome, or every --fasta and one --tss; and
    --circular for the genomes' circular contigs."""
    d = DATASETS[wildcards.ds]
    if d["task"] == "sequence":
        return f"--csv {shlex.quote(input.train)} --val-csv {shlex.quote(input.dev)}"
    fastas = [f"--fasta {shlex.quote(f)}" for f in input.fasta]
    beds = [f"--tss {shlex.quote(t)}" for t in input.tss]
    if len(beds) == len(fastas):
        args = [f"{f} {t}" for f, t in zip(fastas, beds)]
    else:
        args = fastas + beds
    return " ".join([*args, circular_arg(training_genomes(d))]).strip()


def train_settings(wildcards):
    d = DATASETS[wildcards.ds]
    sets = [f"--set {shlex.quote(f'{key}={value}')}" for key, value in d["settings"].items()]
    return " ".join([f"--preset {d.get('preset', config['preset'])}", *sets])


def train_gpus(wildcards):
    return DATASETS[wildcards.ds]["gpus"]


def launcher(wildcards, resources):
    """One process, or torchrun DDP with one process per GPU."""
    if resources.gpu > 1:
        return f"torchrun --standalone --nproc-per-node {resources.gpu} -m genolin"
    return "genolin"


# --- evaluation ---


def evaluate_inputs(wildcards):
    d = DATASETS[wildcards.ds]
    inputs = {"model": f"{RESULTS}/models/{wildcards.ds}"}
    if d["task"] == "sequence":
        inputs["test"] = f"{RESULTS}/datasets/{wildcards.ds}/test.tsv"
    else:
        inputs["fasta"] = GENOMES[wildcards.target]
        inputs["tss"] = d["evaluate"].get(wildcards.target) or tss_of(d, wildcards.target)
    return inputs


def evaluate_args(wildcards, input):
    d = DATASETS[wildcards.ds]
    if d["task"] == "sequence":
        return f"--csv {shlex.quote(input.test)}"
    scope = "--held-out" if wildcards.target in training_genomes(d) else "--whole-genome"
    circular = circular_arg([wildcards.target])
    return (f"--fasta {shlex.quote(input.fasta)} --tss {shlex.quote(input.tss)} --rc-average {scope} "
            f"{call_args()} {circular}").strip()


# --- prediction ---


def predict_args(wildcards):
    """Options of genolin predict for one genome (``group_args``)."""
    return group_args([wildcards.genome])


def call_args():
    """How predict calls promoters, which evaluate's calls follow too: a threshold or a density, and the distance."""
    o = config["predict_options"]
    if o.get("threshold") is not None and o.get("calls_per_mbp") is not None:
        raise WorkflowError("predict_options: give threshold or calls_per_mbp, not both")
    threshold = "" if o.get("threshold") is None else f"--threshold {o['threshold']} "
    density = "" if o.get("calls_per_mbp") is None else f"--calls-per-mbp {o['calls_per_mbp']} "
    return f"{threshold}{density}--min-distance {o['min_distance']}"


SCATTER = bool(config["predict_options"].get("scatter", False))
GROUP = int(config["predict_options"].get("group", 1))
if SCATTER and GROUP > 1:
    raise WorkflowError("predict_options: scatter (a job per contig) and group (a job per group of genomes) "
                        "exclude each other")


def predict_groups():
    """(model, number, genomes) of each prediction job of predict_options.group: a model's genomes (in the order of
    predict:) in groups of up to GROUP, each group one `genolin predict --out-dir` (one start-up and model load).
    Genomes share a group only with genomes of the same circular: setting (--circular applies to a whole job)."""
    by_key = {}
    for genome, models in config["predict"].items():
        circular = CIRCULAR.get(genome)
        for model in models:
            key = (model, repr(sorted(circular) if isinstance(circular, list) else circular))
            by_key.setdefault(key, []).append(genome)
    out, numbers = [], {}
    for (model, _), genomes in by_key.items():
        for j in range(0, len(genomes), GROUP):
            numbers[model] = numbers.get(model, -1) + 1
            out.append((model, numbers[model], genomes[j: j + GROUP]))
    return out


def genome_table(genomes):
    """A --genomes list (header name, fasta) of config genomes, as printf %b text."""
    # absolute: genolin reads a list's relative paths from the list's folder, config paths are from the workdir
    return "name\\tfasta\\n" + "".join(f"{g}\\t{os.path.abspath(GENOMES[g])}\\n" for g in genomes)


def group_args(genomes):
    """Options of genolin predict for these genomes; without a threshold or a density each model calls at its
    training genomes' TSS density."""
    o = config["predict_options"]
    rc = "--rc-average" if o["rc_average"] else "--no-rc-average"
    return f"{call_args()} {rc} {circular_arg(genomes)}".strip()


def genome_contigs(genome):
    """Contig names of a genome, in FASTA order, from the sizes file of the index_genome checkpoint."""
    sizes = checkpoints.index_genome.get(genome=genome).output.sizes
    with open(sizes) as fh:
        return [line.split("\t")[0] for line in fh if line.strip()]


def part_contig(wildcards, input):
    """The contig of part number {part} (its line in the sizes file), quoted for the shell."""
    with open(input.sizes) as fh:
        names = [line.split("\t")[0] for line in fh if line.strip()]
    return shlex.quote(names[int(wildcards.part)])


def contig_part_prefixes(wildcards):
    base = f"{RESULTS}/predictions/{wildcards.model}/{wildcards.genome}.parts"
    return [f"{base}/{i}" for i in range(len(genome_contigs(wildcards.genome)))]


def contig_part_peaks(wildcards):
    return [p + suffix for p in contig_part_prefixes(wildcards) for suffix in (".plus.bedGraph", ".minus.bedGraph",
                                                                               ".peaks.bed")]


# --- paths derived from a rule's outputs (so they hold without a shared filesystem) ---


def output_folder(wildcards, output):
    return os.path.dirname(output[0])


def prediction_prefix(wildcards, output):
    return output.peaks[: -len(".peaks.bed")]


wildcard_constraints:
    ds="[A-Za-z0-9_-]+",
    genome="[A-Za-z0-9_-]+",
    model="[A-Za-z0-9_-]+",
    target="[A-Za-z0-9_-]+",
