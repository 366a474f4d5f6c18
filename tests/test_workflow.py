"""The Snakemake workflow: lint, dry runs of every config and the SLURM profile, a schema error, and the demo end
to end (marked slow: about 2 minutes on 2 cores)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

pytest.importorskip("snakemake", reason="the workflow extra is not installed (pip install -e '.[workflow]')")


def snakemake(*args, cwd=REPO, check=True):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def shared_files(config) -> list[str]:
    """Every path under ../shared that a workflow config names (relative to the repository)."""
    import yaml

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from walk(v)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v)
        elif isinstance(value, str) and value.startswith("../shared/"):
            yield value

    return list(walk(yaml.safe_load(open(config))))


def test_shared_files_of_a_config_are_found(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("a: {b: ../shared/data/gue/x.csv, c: [1, ../shared/data/y.bed]}\nd: data/z.fa\n")
    assert shared_files(config) == ["../shared/data/gue/x.csv", "../shared/data/y.bed"]


@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "workflows" / "config").glob("*.yaml")))
def test_configs_that_explain_ask_for_enough_regions_for_motifs(config):
    import yaml

    from genolin.motifs import MOTIF_MIN_REGIONS

    top = (yaml.safe_load(open(REPO / "workflows" / "config" / config)).get("explain") or {}).get("top", 0)
    assert top == 0 or top >= MOTIF_MIN_REGIONS, f"{config}: explain.top {top} gives TF-MoDISco too few regions"


def test_lint_is_clean():
    out = snakemake("--lint")
    assert "Congratulations, your workflow is in a good condition!" in out.stdout + out.stderr


def test_demo_dry_run(tmp_path):
    out = snakemake("-n", "--directory", str(REPO), "--config", f"results={tmp_path}/results")
    text = out.stdout + out.stderr
    for rule in ("index_genome", "split_dataset", "train", "evaluate", "predict_genome", "explain_top_promoters",
                 "summarise"):
        assert rule in text
    assert "tokenize" not in text  # no token cache that nothing reads


@pytest.mark.parametrize("config", ["gue_prom_core_all.yaml", "ecoli_tss_track.yaml", "tracks_bacteria.yaml"])
def test_real_data_configs_dry_run_with_slurm_profile(config, tmp_path):
    missing = [f for f in shared_files(REPO / "workflows" / "config" / config) if not (REPO / f).exists()]
    if missing:
        pytest.skip(f"needs {missing[0]} (the real data the example config names, in ../shared/data)")
    out = snakemake("-n", "--profile", "workflows/profiles/slurm-gpu", "--configfile", f"workflows/config/{config}")
    text = out.stdout + out.stderr
    assert "is replaced by additional config" in text and "gue_tata" not in text  # the demo does not leak in
    if config == "ecoli_tss_track.yaml":
        assert "torchrun --standalone --nproc-per-node 2 -m genolin train" in text
        assert "gpu=2" in text and "gpu_model=h100" in text
    if config == "tracks_bacteria.yaml":  # three training genomes, each with its BED; held out on each
        bacteria = "../shared/data/bacteria"
        assert (f"--fasta ../shared/data/ecoli_k12/NC_000913.3.fa.bgz --tss ../shared/data/ecoli_k12/regulondb_10.9_tss"
                f".bed --fasta {bacteria}/BACILLUS/BACILLUS.fasta.gz --tss {bacteria}/BACILLUS/BACILLUS.bed --fasta "
                f"{bacteria}/CJEJUNI_2/CJEJUNI_2.fasta.gz --tss {bacteria}/CJEJUNI_2/CJEJUNI_2.bed") in text
        assert text.count("--held-out") == 3 and text.count("genolin predict") == 6


def test_a_bundled_model_predicts_with_no_training_step(tmp_path):
    out = snakemake("-n", "--replace-workflow-config", "--configfile", "workflows/config/bacteria_ready.yaml",
                    "--config", f"results={tmp_path}/results")
    text = out.stdout + out.stderr
    assert "predict_genome" in text and "explain_top_promoters" in text and "rule train" not in text
    assert "genolin predict --model bacteria --fasta data/ecoli_k12/NC_000913.3.fa.bgz" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text("genomes:\n  g: data/ecoli_k12/NC_000913.3.fa.bgz\npredict:\n  g: [bacteria]\n")
    out = snakemake("-n", "--configfile", str(bad), "--replace-workflow-config", check=False)
    assert out.returncode != 0 and "'bacteria' is not a track dataset or a model under ready_models:" in \
        out.stdout + out.stderr


def test_schema_violation_stops_with_its_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets:\n  x:\n    task: sequence\n    labelled: data/gue/prom_core_tata/dev.csv\n"
                   "preset: huge\n")
    out = snakemake("-n", "--configfile", str(bad), "--replace-workflow-config", check=False)
    assert out.returncode != 0 and "'huge' is not one of ['tiny', 'small', 'base']" in out.stdout + out.stderr
    bad.write_text("datasets:\n  x:\n    task: track\n    genome: nowhere\n    tss: data/ecoli_k12/gene_starts.bed\n")
    out = snakemake("-n", "--configfile", str(bad), "--replace-workflow-config", check=False)
    assert out.returncode != 0 and "genome 'nowhere' is not listed under genomes:" in out.stdout + out.stderr


@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    """snakemake --cores 2 in a copy of the project: model, metrics, report, genome track (predicted per contig and
    gathered: predict_options.scatter)."""
    work = tmp_path / "project"
    work.mkdir()
    for name in ("Snakefile", "workflows", "profiles", "data"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    config = work / "scatter.yaml"
    config.write_text((work / "workflows" / "config" / "demo.yaml").read_text() + "  scatter: true\n")
    snakemake("--cores", "2", "--configfile", str(config), cwd=work)
    results = work / "results"
    seq = json.loads((results / "eval" / "gue_tata" / "test" / "metrics.json").read_text())
    assert seq["n"] == 613 and seq["auroc"] > 0.6  # a trained classifier, better than chance
    state = json.loads((results / "models" / "gue_tata" / "trainer_state.json").read_text())
    assert state["best_epoch"] > 0  # the network beat the k-mer regression it started from (epoch 0) on dev
    track = json.loads((results / "eval" / "ecoli_gene_starts" / "ecoli_k12" / "metrics.json").read_text())
    assert track["pooled"]["n"] == 2 * (-(-4_641_652 // 50) - 4_177_484 // 50)  # the held-out tenth, 50-bp bins
    from genolin.checkpoint import load_tensors

    stored = float(load_tensors(results / "models" / "ecoli_gene_starts" / "best.safetensors")[1]["threshold"])
    assert track["pooled"]["threshold"] == stored and track["bin_bp"] == 50  # the model's own threshold for bins
    density = json.loads((results / "models" / "ecoli_gene_starts" / "config.json").read_text())["tss_per_mbp"]
    assert track["calls"]["density"] == density  # calls at the training genome's TSS density
    peaks = (results / "predictions" / "ecoli_gene_starts" / "ecoli_k12.peaks.bed").read_text().splitlines()
    k = int(density * 4.641652 + 0.5)  # the one contig's k most probable local maxima (ties at the k-th kept)
    assert f"the {density:.4g} per Mbp" in peaks[0] and k <= len(peaks) - 1 <= k + 10
    assert (results / "models" / "gue_tata" / "best.safetensors").exists()
    summary = (results / "report" / "summary.md").read_text()
    assert "| gue_tata | test | sequences | 613 |" in summary and "ecoli_gene_starts" in summary
    table = (results / "report" / "metrics.tsv").read_text().splitlines()
    assert table[0].startswith("model\tdata\tscope") and len(table) == 1 + 1 + 3
    plus = (results / "predictions" / "ecoli_gene_starts" / "ecoli_k12.plus.bedGraph").read_text().splitlines()
    end = 0
    for line in plus[1:]:
        contig, start, stop, _ = line.split("\t")
        assert contig == "NC_000913.3" and int(start) == end
        end = int(stop)
    assert end == 4_641_652
    assert (results / "genomes" / "ecoli_k12.sizes").read_text() == "NC_000913.3\t4641652\n"
    assert not (results / "tokens").exists()
    snakemake("--report", str(results / "report.html"), cwd=work)
    assert "genolin workflow" in (results / "report.html").read_text(errors="replace")


def test_circular_genomes_reach_train_evaluate_and_predict(tmp_path):
    """config circular: genome -> all (or contig names) puts --circular on the track jobs of that genome; a name
    that is not a genome, or 'all' for one of several training genomes, stops with one line."""
    config = tmp_path / "circular.yaml"
    demo = (REPO / "workflows" / "config" / "demo.yaml").read_text()
    config.write_text(demo + "circular:\n  ecoli_k12: all\n")
    out = snakemake("-n", "--directory", str(REPO), "--configfile", str(config), "--config",
                    f"results={tmp_path}/results")
    text = out.stdout + out.stderr
    for command in ("genolin train", "genolin evaluate", "genolin predict"):
        lines = [line for line in text.splitlines() if command in line and "ecoli_gene_starts" in line]
        assert lines and all("--circular all" in line for line in lines), (command, lines)
    assert not any("--circular" in line for line in text.splitlines() if "gue_tata" in line)
    config.write_text(demo + "circular:\n  ecoli_k12: [NC_000913.3]\n")
    out = snakemake("-n", "--directory", str(REPO), "--configfile", str(config), "--config",
                    f"results={tmp_path}/results")
    assert "--circular NC_000913.3" in out.stdout + out.stderr
    config.write_text(demo + "circular:\n  nowhere: all\n")
    out = snakemake("-n", "--directory", str(REPO), "--configfile", str(config), "--config",
                    f"results={tmp_path}/results", check=False)
    assert out.returncode != 0 and "circular: genome 'nowhere' is not listed under genomes:" in out.stdout + out.stderr


def test_scatter_dry_run_plans_contig_jobs(tmp_path):
    config = tmp_path / "scatter.yaml"
    config.write_text((REPO / "workflows" / "config" / "demo.yaml").read_text() + "  scatter: true\n")
    out = snakemake("-n", "--directory", str(REPO), "--configfile", str(config), "--config",
                    f"results={tmp_path}/results")
    text = out.stdout + out.stderr
    assert "index_genome" in text and "gather_predictions" in text and "predict_genome" not in text


def test_contig_predictions_gather_into_the_whole_genome_files(tmp_path):
    """`genolin predict --contig` per contig, joined by workflows/scripts/gather_predictions.py, gives the files of
    one whole-genome run, byte for byte (headers and promoter numbering included)."""
    from click.testing import CliRunner
    from conftest import ECOLI_BGZ, FIXTURES

    from genolin.cli import cli
    from genolin.io.fasta import read_fasta

    sys.path.insert(0, str(REPO / "workflows" / "scripts"))
    from gather_predictions import gather

    (rec,) = read_fasta(ECOLI_BGZ)
    contigs = {"c1": rec.seq[:9_000], "c 2|x": rec.seq[20_000:27_003], "c3": rec.seq[40_000:51_000]}
    fasta = tmp_path / "g.fa"
    fasta.write_text("".join(f">{c.split()[0]}\n{s.decode()}\n" for c, s in contigs.items()))
    names = [c.split()[0] for c in contigs]
    model = FIXTURES / "v1_runs" / "track_run"

    def predict(*args):
        r = CliRunner().invoke(cli, ["-q", "predict", "--model", str(model), "--fasta", str(fasta), "--rc-average",
                                     "--threshold", "0.0", *map(str, args)])
        assert r.exit_code == 0, r.output

    predict("--out", tmp_path / "whole" / "g")
    for i, name in enumerate(names):
        predict("--contig", name, "--out", tmp_path / "parts" / str(i))
    gather(str(tmp_path / "joined" / "g"), [str(tmp_path / "parts" / str(i)) for i in range(len(names))])
    for suffix in ("plus.bedGraph", "minus.bedGraph", "peaks.bed"):
        whole = (tmp_path / "whole" / f"g.{suffix}").read_text()
        assert (tmp_path / "joined" / f"g.{suffix}").read_text() == whole and whole.count("\n") > 10, suffix
    r = CliRunner().invoke(cli, ["-q", "predict", "--model", str(model), "--fasta", str(fasta), "--contig", "c9",
                                 "--out", str(tmp_path / "bad")])
    assert r.exit_code != 0 and "no contig 'c9'" in r.output and "g.fa" in r.output


def test_genomes_in_groups_give_the_files_of_one_job_each(tmp_path):
    """predict_options.group 2 over three genomes (one of them twice under two names, one circular, one by a path
    relative to the working directory): two `predict --out-dir` jobs, the circular genome in a group of its own,
    whose files equal those of one job per genome, byte for byte; group with scatter is refused."""
    from conftest import ECOLI_BGZ

    from genolin.io.fasta import read_fasta

    (rec,) = read_fasta(ECOLI_BGZ)
    (tmp_path / "a.fa").write_text(f">a1\n{rec.seq[100_000:130_000].decode()}\n")
    (tmp_path / "b.fa").write_text(f">b1\n{rec.seq[600_000:625_000].decode()}\n")
    genomes = {"g_one": tmp_path / "a.fa", "g_three": tmp_path / "a.fa",
               "g_two": os.path.relpath(tmp_path / "b.fa", REPO)}

    def config(name, extra):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"results: {tmp_path / name}\ndevice: cpu\nready_models: [bacteria]\ngenomes:\n"
                        + "".join(f"  {g}: {f}\n" for g, f in genomes.items()) + "predict:\n"
                        + "".join(f"  {g}: [bacteria]\n" for g in genomes) + "circular:\n  g_three: all\n"
                        + f"predict_options:\n  min_distance: 100\n  rc_average: true\n{extra}explain:\n  top: 0\n")
        return str(path)

    grouped, single = config("grouped", "  group: 2\n"), config("single", "")
    for cfg in (grouped, single):
        snakemake("--cores", "2", "--replace-workflow-config", "--configfile", cfg)
    jobs = sorted(p.name for p in (tmp_path / "grouped" / "logs" / "predict").iterdir())
    assert jobs == ["bacteria.group0.log", "bacteria.group1.log"]
    for g in genomes:
        for suffix in ("plus.bedGraph", "minus.bedGraph", "peaks.bed", "gff3"):
            got = (tmp_path / "grouped" / "predictions" / "bacteria" / f"{g}.{suffix}").read_text()
            assert got == (tmp_path / "single" / "predictions" / "bacteria" / f"{g}.{suffix}").read_text(), (g, suffix)
    groups = tmp_path / "grouped" / "predictions" / "bacteria" / "groups"
    for number, names in ((0, ["g_one", "g_two"]), (1, ["g_three"])):
        rows = (groups / f"{number}.summary.tsv").read_text().splitlines()
        assert [r.split("\t")[0] for r in rows] == ["genome", *names]
    out = snakemake("-n", "--replace-workflow-config", "--configfile", config("both", "  group: 2\n  scatter: true\n"),
                    check=False)
    assert out.returncode != 0 and "scatter (a job per contig) and group" in out.stdout + out.stderr
