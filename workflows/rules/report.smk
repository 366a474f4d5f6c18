# The run's summary: a metrics table (TSV, also in the HTML report) and a markdown page linking every plot.


rule summarise:
    input:
        metrics=metrics_files(),
        motifs=explain_files(),
    output:
        table=report(
            f"{RESULTS}/report/metrics.tsv",
            category="Metrics",
            labels={"table": "all models"},
        ),
        summary=f"{RESULTS}/report/summary.md",
    log:
        f"{RESULTS}/logs/summarise.log",
    conda:
        ENV
    script:
        "../scripts/summarise.py"
