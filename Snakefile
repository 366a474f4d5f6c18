# genolin workflow: FASTA and labelled sets -> datasets -> models -> metrics, report, genome tracks.
#
#   snakemake --cores 2                       the demo on the bundled data (workflows/config/demo.yaml)
#   snakemake --report results/report.html    the HTML report of the last run
#   snakemake --profile workflows/profiles/slurm-gpu --configfile workflows/config/ecoli_tss_track.yaml
#
# Rules live in workflows/rules/*.smk, helpers in workflows/rules/common.smk.

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "workflows/config/demo.yaml"


validate(config, "workflows/schemas/config.schema.yaml")


report: "workflows/report/workflow.rst"


include: "workflows/rules/common.smk"
include: "workflows/rules/genomes.smk"
include: "workflows/rules/datasets.smk"
include: "workflows/rules/train.smk"
include: "workflows/rules/evaluate.smk"
include: "workflows/rules/predict.smk"
include: "workflows/rules/explain.smk"
include: "workflows/rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
