"""Central-promoter classification at long context: does a TSS at the centre of a 1 kb, 10 kb or 100 kb window
still get found when the window grows, on a genome the model never saw, and what does the length cost?

Data (../shared/data, not redistributable: the CSVs go to --data-dir, kept out of git by a .gitignore there):
E. coli K-12 (RegulonDB 10.9 TSSs), B. amyloliquefaciens and C. jejuni (Promotech TSSs). Per genome, positives
are windows whose centre is a TSS (either strand) moved by a uniform offset in [-50, 50] bp; negatives are windows
whose centre is at least 2,000 bp from every TSS; as many negatives as positives (fewer where the genome has too
few such positions), at most --max-per-genome per class. The centres are drawn once per genome where a window of
max(--lengths, 100 kbp) fits, so every length holds the same examples and only the context around them differs
(and runs with fewer lengths hold the same examples as a full one).
Leave one genome out: train on the other two (dev: the windows whose centre lies in the last 10% of their contig;
train: the rest), test on every window of the held-out genome.
- genolin: `genolin train --csv train --val-csv dev` per (held-out genome, length, seed), with the recipe genolin
  picks for that input length (k, stride and mixer are read back from each run's config.json), then
  `genolin evaluate` on test: MCC, AUROC, accuracy, training seconds, throughput and peak memory per epoch;
- baseline, same run and splits: k-mer counts (k = 1..6, L1-normalised per k) of the CENTRAL 1 kb of each window,
  scikit-learn LogisticRegression with C chosen on dev MCC; test MCC at probability 0.5 and AUROC;
- with --speed: training (2 epochs) and inference throughput and peak memory on random sequences of
  --speed-lengths (100 kbp and 1 Mbp by default), beside design document 000's 100 kbp figures.
Prints the tables last and writes PREFIX.json and PREFIX.md (hardware, versions, date and command in meta). A run
whose test metrics exist in --work is not trained again; a failed genolin command is recorded in its row (its last
error line), not fatal.

    python benchmarks/long_context.py --quick --device cpu --out /tmp/long_context_quick
    python benchmarks/long_context.py --device cuda --preset small --max-minutes 20 --jobs 3 --speed \\
        --work $SCRATCH/long_context
    python benchmarks/long_context.py --skip-train --speed --speed-lengths 100000 --speed-n 4 --out /tmp/lc_speed
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, command, fill_defaults, heading, now, work_folder, write_result  # noqa: E402
from gue_promoters import fit_on_dev, kmer_features  # noqa: E402  (the GUE benchmark's k-mer profile and regression)

GENOMES = {  # name -> (FASTA, TSS BED6) under --shared, species
    "ECOLI_K12": ("ecoli_k12/NC_000913.3.fa.bgz", "ecoli_k12/regulondb_10.9_tss.bed", "E. coli K-12"),
    "BACILLUS": ("bacteria/BACILLUS/BACILLUS.fasta.gz", "bacteria/BACILLUS/BACILLUS.bed", "B. amyloliquefaciens"),
    "CJEJUNI_2": ("bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz", "bacteria/CJEJUNI_2/CJEJUNI_2.bed", "C. jejuni"),
}
JITTER_BP = 50  # positives: the TSS lies within this many bp of the window centre
NEGATIVE_GAP_BP = 2000  # negatives: the centre is at least this far from every TSS
MIN_FIT_BP = 100_000  # centres are drawn where this long a window fits, whatever --lengths says
CENTRAL_BP = 1000  # the baseline reads this many central bases of each window
DEV_FRACTION = 0.1  # dev: training windows centred in the last tenth of their contig
# Design document 000 (../shared/design/000-linear-attention-handbook.md, "DNA Sequence Analysis (Human
# Genome)"), quoted as written: no hardware, data set or source is named there, and its score is accuracy.
DESIGN_000 = """Task: Promoter region classification
Sequence length: 100,000 base pairs
Model: 6-layer transformer

                 | Time/Seq | Memory | Accuracy
-------------------------------------------------
Standard Attn    | OOM      | OOM    | -
Linear (ELU)     | 2.3s     | 12 GB  | 87.2%
FAVOR+ (m=128)   | 3.1s     | 14 GB  | 89.1%
FAVOR+ (m=256)   | 4.8s     | 18 GB  | 89.8%"""
# Measures peak GPU memory of inference from inside the process (invisible from outside): load the run, tokenize
# the CSV as `genolin predict` does, one warm-up pass (CUDA graphs, kernel loading), then one timed pass.
INFER_CHILD = r"""
import csv, json, sys, time
csv.field_size_limit(sys.maxsize)  # the csv module stops at 131,072-character cells unless a genolin raises it
import torch
from genolin.inference import load_run
from genolin.io.labelled import read_sequences
from genolin.tasks.sequence import SequenceData
run_dir, path, device = sys.argv[1:4]


def timed(run, rc):
    # (warm-up seconds, seconds) of sequence_probs over every sequence, the second call timed after the first
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        run.predictor.sequence_probs(data, rc_average=rc)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


t0 = time.perf_counter()
run = load_run(run_dir, device, shift_views=None)  # None: the views `genolin predict` uses by default
load_s = time.perf_counter() - t0
data = SequenceData(read_sequences(path), k=run.config.train.k, stride=run.config.train.stride)
rc = run.rc_average(None)
cuda = run.predictor.device.type == "cuda"
if cuda:
    torch.cuda.reset_peak_memory_stats()
warmup_s, seconds = timed(run, rc)
gpu_peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
one = load_run(run_dir, device, shift_views=0)  # one view: the sequences as given
_, one_s = timed(one, False)
print(json.dumps({"n": len(data), "load_s": load_s, "warmup_s": warmup_s, "predict_s": seconds, "rc_average": rc,
                  "one_view_s": one_s, "gpu_peak_gib": gpu_peak}))
"""


# -- data ------------------------------------------------------------------------------------------------------------
def read_tss(bed: Path) -> dict[str, np.ndarray]:
    """Contig -> sorted unique TSS positions (0-based BED starts, both strands together)."""
    sites: dict[str, set[int]] = {}
    for line in bed.read_text().splitlines():
        f = line.split("\t")
        if len(f) < 6 or line.startswith(("#", "track", "browser")):
            continue
        sites.setdefault(f[0], set()).add(int(f[1]))
    return {c: np.array(sorted(s), dtype=np.int64) for c, s in sites.items()}


def spaced(candidates: np.ndarray, spacing: int, rng: np.random.Generator) -> np.ndarray:
    """A random subset of sorted ``candidates`` with no two closer than ``spacing`` bp (greedy, random order)."""
    if spacing <= 0 or len(candidates) < 2:
        return candidates
    taken = np.zeros(0, dtype=np.int64)
    for c in rng.permutation(candidates):
        i = np.searchsorted(taken, c)
        if (i == 0 or c - taken[i - 1] >= spacing) and (i == len(taken) or taken[i] - c >= spacing):
            taken = np.insert(taken, i, c)
    return taken


def genome_examples(name: str, shared: Path, fit_bp: int, max_per_class: int, seed: int, spacing: int) -> dict:
    """One genome's windows: {"seqs": contig -> bytes, "examples": [(contig, centre, label)], "counts": {...}}.

    Centres lie where a ``fit_bp`` window fits inside the contig; ``spacing``: the least distance between two
    centres of one class (0: any, as long as they differ). Contigs without any TSS are left out (no annotation
    there, so no negatives either)."""
    from genolin.io.fasta import read_fasta

    fasta, bed, _ = GENOMES[name]
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])  # per genome: independent of what else runs
    seqs = {rec.name: rec.seq for rec in read_fasta(shared / fasta)}
    tss = read_tss(shared / bed)
    pos_all, neg_all, counts = [], [], {"tss": 0, "negative_positions": 0, "negative_gaps": 0}
    for contig, seq in seqs.items():
        sites = tss.get(contig)
        if sites is None or not len(sites):
            continue
        n = len(seq)
        lo, hi = fit_bp // 2, n - fit_bp + fit_bp // 2  # centre c: window [c - L // 2, c - L // 2 + L) fits
        if hi < lo:
            continue
        counts["tss"] += len(sites)
        centres = np.unique(sites + rng.integers(-JITTER_BP, JITTER_BP + 1, size=len(sites)))
        centres = spaced(centres[(centres >= lo) & (centres <= hi)], spacing, rng)
        pos_all += [(contig, int(c)) for c in centres]
        # positions closer than NEGATIVE_GAP_BP to a TSS, by a difference array over the contig
        cover = np.zeros(n + 1, dtype=np.int32)
        np.add.at(cover, np.clip(sites - NEGATIVE_GAP_BP + 1, 0, n), 1)
        np.add.at(cover, np.clip(sites + NEGATIVE_GAP_BP, 0, n), -1)
        free = np.cumsum(cover[:n]) == 0
        free[:lo] = False
        free[hi + 1:] = False
        counts["negative_positions"] += int(free.sum())
        counts["negative_gaps"] += int((np.diff(free.astype(np.int8), prepend=0) == 1).sum())
        candidates = np.flatnonzero(free)
        if spacing > 0:  # a grid of random phase: every candidate at least `spacing` from the next
            candidates = candidates[candidates % spacing == rng.integers(spacing)]
        neg_all += [(contig, int(c)) for c in candidates]
    counts["positives_available"], counts["negatives_available"] = len(pos_all), len(neg_all)
    n_pos = min(len(pos_all), max_per_class)
    n_neg = min(n_pos, len(neg_all))
    pos = [pos_all[i] for i in rng.choice(len(pos_all), n_pos, replace=False)]
    neg = [neg_all[i] for i in rng.choice(len(neg_all), n_neg, replace=False)]
    counts["positives"], counts["negatives"] = n_pos, n_neg
    examples = sorted([(c, p, 1) for c, p in pos] + [(c, p, 0) for c, p in neg])
    return {"seqs": seqs, "examples": examples, "counts": counts}


def is_dev(genome: dict, example: tuple) -> bool:
    contig, centre, _ = example
    return centre >= (1 - DEV_FRACTION) * len(genome["seqs"][contig])


def window(genome: dict, example: tuple, length: int) -> bytes:
    contig, centre, _ = example
    start = centre - length // 2
    return genome["seqs"][contig][start:start + length]


def write_csv(path: Path, rows: list[tuple[str, dict, tuple]], length: int) -> None:
    """``id,sequence,label`` for (genome name, genome, example) rows; written under a temporary name, then
    renamed, so an interrupted write leaves no file that looks complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write("id,sequence,label\n")
        for name, genome, ex in rows:
            fh.write(f"{name}_{ex[0]}_{ex[1]}_{ex[2]},{window(genome, ex, length).decode()},{ex[2]}\n")
    os.replace(tmp, path)


def split_rows(genomes: dict, held: str) -> dict[str, list]:
    """train / dev / test rows for one held-out genome."""
    out: dict[str, list] = {"train": [], "dev": [], "test": []}
    for name, g in genomes.items():
        for ex in g["examples"]:
            part = "test" if name == held else "dev" if is_dev(g, ex) else "train"
            out[part].append((name, g, ex))
    return out


def prepare_data(args, genomes: dict, data_dir: Path) -> dict:
    """The CSVs of every (held-out genome, length) under ``data_dir`` (kept if already there) -> their paths and
    class counts."""
    data_dir.mkdir(parents=True, exist_ok=True)
    splits = {}
    for held in args.held_out:
        rows = split_rows(genomes, held)
        counts = {part: {"n": len(r), "positives": sum(ex[2] for _, _, ex in r)} for part, r in rows.items()}
        for length in dict.fromkeys(args.lengths + args.score_lengths):
            folder = data_dir / f"{held}_L{length}"
            for part, r in rows.items():  # a length only scored at (--score-lengths) needs its test windows only
                if not (folder / f"{part}.csv").exists() and (length in args.lengths or part == "test"):
                    write_csv(folder / f"{part}.csv", r, length)
            splits[(held, length)] = {"dir": folder, "counts": counts}
        print(f"held out {held}: " + ", ".join(f"{p} {c['n']} ({c['positives']} positive)" for p, c in counts.items()),
              flush=True)
    return splits


# -- baseline --------------------------------------------------------------------------------------------------------
def kmer_baseline(genomes: dict, held: str, features: dict) -> dict:
    """The k-mer regression on the central 1 kb, trained on the other genomes (C on dev MCC), scored on ``held``.
    ``features``: genome name -> its examples' feature matrix (computed once, shared by every held-out genome)."""
    from scipy import sparse
    from sklearn.metrics import accuracy_score, matthews_corrcoef, roc_auc_score

    t0 = time.perf_counter()
    parts: dict[str, tuple[list, list]] = {"train": ([], []), "dev": ([], []), "test": ([], [])}
    for name, g in genomes.items():
        dev = np.array([is_dev(g, ex) for ex in g["examples"]], dtype=bool)
        y = np.array([ex[2] for ex in g["examples"]])
        for part, keep in (("test", np.ones_like(dev)),) if name == held else (("train", ~dev), ("dev", dev)):
            parts[part][0].append(features[name][np.flatnonzero(keep)])
            parts[part][1].append(y[keep])
    x = {p: sparse.vstack(xs).tocsr() for p, (xs, _) in parts.items()}
    y = {p: np.concatenate(ys) for p, (_, ys) in parts.items()}
    dev_mcc, c, clf = fit_on_dev(x["train"], y["train"], x["dev"], y["dev"])
    p = clf.predict_proba(x["test"])[:, 1]
    yt = y["test"]
    # genolin evaluate decides at the threshold its run chose on validation (max MCC): the same rule, for comparison
    p_dev = clf.predict_proba(x["dev"])[:, 1]
    cut = max(np.unique(p_dev), key=lambda t: matthews_corrcoef(y["dev"], p_dev >= t))
    return {"C": c, "dev_mcc": float(dev_mcc), "test_mcc": float(matthews_corrcoef(yt, p >= 0.5)),
            "dev_threshold": float(cut), "test_mcc_dev_threshold": float(matthews_corrcoef(yt, p >= cut)),
            "test_auroc": float(roc_auc_score(yt, p)), "test_accuracy": float(accuracy_score(yt, p >= 0.5)),
            "n_train": len(y["train"]), "n_dev": len(y["dev"]), "n_test": len(yt), "n_test_pos": int(yt.sum()),
            "seconds": round(time.perf_counter() - t0, 1)}


# -- genolin runs ----------------------------------------------------------------------------------------------------
def run_child(cmd: list[str], log: Path, timeout: float | None = None) -> dict:
    """Run ``cmd`` (stdout and stderr to ``log``) -> rc, wall seconds, its peak RSS (from wait4: this child and the
    processes it waited for, not the benchmark's other children) and, on failure, its last output line."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer:
            timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if timer:
            timer.cancel()
    out = {"rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 2),
           "peak_rss_gib": round(usage.ru_maxrss / 2**20, 3)}
    if proc.returncode:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
        if proc.returncode < 0:
            why = f"killed by signal {-proc.returncode}" + (f" (--timeout {timeout:g} s)" if timeout else "")
        else:
            why = lines[-1] if lines else f"exit status {proc.returncode}"
        out["error"] = f"{cmd[len(GENOLIN)] if cmd[:len(GENOLIN)] == GENOLIN else cmd[0]}: {why}"[:500]
    return out


def common_options(args) -> list[str]:
    """--preset and --set items every training gets."""
    return (["--preset", args.preset] if args.preset else []) + [a for kv in args.set for a in ("--set", kv)]


def epoch_records(run: Path) -> list[dict]:
    """The epochs of RUN/metrics.jsonl that trained to their end (records with a training loss), with the fields
    this benchmark reports (sequences/s: the trainer writes it as items_per_s; peak memory: its process's CUDA peak
    on a GPU, its peak RSS on CPU; either may be absent from older runs)."""
    out = []
    for r in metrics_lines(run):
        if "epoch" in r and r.get("train_loss") is not None and "seconds" in r:
            out.append({"epoch": r["epoch"], "step": r.get("step"), "train_loss": r["train_loss"],
                        "seconds": r["seconds"], "tokens_per_s": r.get("tokens_per_s"),
                        "sequences_per_s": r.get("sequences_per_s", r.get("items_per_s")),
                        "peak_memory_gib": r.get("peak_memory_gib"),
                        "val_score": (r.get("val") or {}).get("score")})
    return out


def best_epochs(runs: list[dict]) -> str:
    """Each run's kept epoch (from --seeds' order), and how many of them memorised: "2, 2, 5 (2 of 3)"."""
    kept = ", ".join("-" if g.get("best_epoch") is None else str(g["best_epoch"]) for g in runs)
    flagged = sum(bool(g.get("memorising")) for g in runs)
    return f"{kept} ({flagged} of {len(runs)})" if runs else ""


def metrics_lines(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def what_ran(run: Path) -> dict:
    """Settings, steps and epochs of a run, as far as it got."""
    return {**run_settings(run), **run_progress(run), **pooling_prior(run), "epochs": epoch_records(run)}


def pooling_prior(run: Path) -> dict:
    """The learned distance slope of the attention pooling, and the range of its position-bin scores, in the weights
    evaluate uses (best.safetensors, else model.safetensors); empty for a run without them."""
    from safetensors import safe_open

    path = next((p for p in (run / "best.safetensors", run / "model.safetensors") if p.exists()), None)
    if path is None:
        return {}
    with safe_open(str(path), framework="pt") as f:  # reads only the two tensors
        keys = list(f.keys())
        slope, bins = (next((f.get_tensor(k) for k in keys if k.endswith(name)), None)
                       for name in ("pool_slope", "pool_position"))
    out = {}
    if slope is not None:
        out["pool_slope"] = float(slope.float())
    if bins is not None:
        out["pool_position_range"] = [float(bins.min().float()), float(bins.max().float())]
    return out


def run_progress(run: Path) -> dict:
    """Optimizer steps taken, the stop rule that ended training early if one did (an epoch cut short by
    --max-minutes leaves no epoch record, only a 'stopped' one), the epoch whose weights the run kept (best_epoch;
    0: the starting model) and whether the trainer found the run memorising at some epoch."""
    lines = metrics_lines(run)
    return {"steps": max((r.get("step") or 0 for r in lines), default=0),
            "stopped": next((r["stopped"] for r in reversed(lines) if r.get("stopped")), None),
            "best_epoch": next((r["best_epoch"] for r in reversed(lines) if "best_epoch" in r), None),
            "memorising": any(r.get("memorising") for r in lines)}


def run_settings(run: Path) -> dict:
    """k, stride, mixer and model size of a run (its config.json)."""
    try:
        train = json.loads((run / "config.json").read_text())["train"]
    except (OSError, KeyError, ValueError):
        return {}
    model = train.get("model", {})
    return {"k": train.get("k"), "stride": train.get("stride"), "mixer": model.get("mixer"),
            "n_layers": model.get("n_layers"), "d_model": model.get("d_model"), "max_len": model.get("max_len"),
            "stem_pool": model.get("stem_pool", 1), "crop_min_bp": train.get("crop_min_bp", 0)}


def evaluate_cmd(args, run: Path, csv: Path, out: Path) -> list[str]:
    """The command that scores ``run`` on ``csv`` into ``out`` (with --one-view: the sequences as given only)."""
    return [*GENOLIN, "evaluate", "--model", str(run), "--csv", str(csv), "--out", str(out), "--device", args.device,
            *(["--no-rc-average", "--shift-average", "0"] if args.one_view else [])]


def genolin_run(args, split: dict, held: str, length: int, seed: int, work: Path) -> dict:
    """Train one run and score it on test. What ``work`` holds from an earlier call is reused: a run scored on test
    is read back, one trained to the end (its benchmark_train.json) only scored; anything else there (a failed or
    killed run) is trained anew."""
    run = work / f"{held}_L{length}_seed{seed}"
    folder = split["dir"]
    done = run / "benchmark_train.json"  # written when `genolin train` succeeded: its wall time and peak RSS
    out = {"seed": seed, "run": str(run)}
    if not done.exists():
        if run.exists():
            shutil.rmtree(run)
        cmd = [*GENOLIN, "train", "--csv", str(folder / "train.csv"), "--val-csv", str(folder / "dev.csv"),
               "--out", str(run), "--seed", str(seed), "--device", args.device, *common_options(args)]
        if args.max_minutes:
            cmd += ["--max-minutes", str(args.max_minutes)]
        train = run_child(cmd, work / f"{run.name}.train.log", args.timeout)
        out.update(train_seconds=train["wall_s"], train_peak_rss_gib=train["peak_rss_gib"])
        if "error" in train:
            return {**out, "error": train["error"], **what_ran(run)}
        done.write_text(json.dumps({k: out[k] for k in ("train_seconds", "train_peak_rss_gib")}) + "\n")
    else:
        out.update(json.loads(done.read_text()))
    if not (run / "test" / "metrics.json").exists():
        ev = run_child(evaluate_cmd(args, run, folder / "test.csv", run / "test"), work / f"{run.name}.evaluate.log",
                       args.timeout)
        out.update(evaluate_seconds=ev["wall_s"])
        if "error" in ev:
            return {**out, "error": ev["error"], **what_ran(run)}
        done.write_text(json.dumps({k: out[k] for k in ("train_seconds", "train_peak_rss_gib", "evaluate_seconds")
                                    if k in out}) + "\n")
    m = json.loads((run / "test" / "metrics.json").read_text())
    out.update(test_mcc=m["mcc"], test_auroc=m.get("auroc"), test_auprc=m.get("auprc"),
               test_accuracy=m.get("accuracy"))
    for other in (n for n in args.score_lengths if n != length):  # the same test centres, windows cut to `other`
        scored = run / f"test_L{other}"
        if not (scored / "metrics.json").exists():
            test = folder.parent / f"{held}_L{other}" / "test.csv"  # as prepare_data names it
            ev = run_child(evaluate_cmd(args, run, test, scored), work / f"{run.name}.evaluate_L{other}.log",
                           args.timeout)
            if "error" in ev:
                return {**out, "error": f"scoring at {other:,} bp: {ev['error']}", **what_ran(run)}
        mo = json.loads((scored / "metrics.json").read_text())
        out.setdefault("test_at", {})[str(other)] = {"mcc": mo["mcc"], "auroc": mo.get("auroc")}
    return {**out, **what_ran(run)}


# -- speed -----------------------------------------------------------------------------------------------------------
def speed_row(args, length: int, n: int, work: Path) -> dict:
    """Train 2 epochs on ``n`` random sequences of ``length`` bp (validated on the same), then predict them."""
    rng = np.random.default_rng(length)
    data = work / f"speed_L{length}.{args.speed_format}"
    seqs = [np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, length)].tobytes().decode() for _ in range(n)]
    if args.speed_format == "csv":
        data.write_text("id,sequence,label\n" + "".join(f"r{i},{s},{i % 2}\n" for i, s in enumerate(seqs)))
        given = ["--csv", str(data)]
        train_data = ["--csv", str(data), "--val-csv", str(data)]
    else:
        data.write_text("".join(f">r{i} label={i % 2}\n{s}\n" for i, s in enumerate(seqs)))
        given = ["--fasta", str(data)]
        train_data = ["--fasta", str(data), "--val-fasta", str(data)]
    run = work / f"speed_L{length}_run"
    if run.exists():  # timings are measured afresh every time
        shutil.rmtree(run)
    row = {"length": length, "n": n, "format": args.speed_format}
    # whole sequences (no centre crops): the cost of a step at the full length
    train = run_child([*GENOLIN, "train", *train_data, "--out", str(run), "--epochs", "2", "--device", args.device,
                       *common_options(args), "--set", "crop_min_bp=0"], work / f"{run.name}.train.log", args.timeout)
    row.update(run_settings(run), train_wall_s=train["wall_s"], train_peak_rss_gib=train["peak_rss_gib"])
    epochs = epoch_records(run)
    row["epochs"] = epochs
    if "error" in train:
        return {**row, "error": train["error"]}
    second = next((e for e in epochs if e["epoch"] == 2), None)
    if second is None:
        return {**row, "error": "train: no second epoch in metrics.jsonl"}
    row.update(train_seq_per_s=second["sequences_per_s"] or n / second["seconds"],
               train_tokens_per_s=second["tokens_per_s"], train_peak_memory_gib=second["peak_memory_gib"])
    pred = run_child([*GENOLIN, "predict", "--model", str(run), *given, "--out", str(run / "preds.tsv"), "--device",
                      args.device], work / f"{run.name}.predict.log", args.timeout)
    row.update(predict_wall_s=pred["wall_s"], predict_seq_per_s=n / pred["wall_s"],
               predict_peak_rss_gib=pred["peak_rss_gib"])
    if "error" in pred:
        row["error"] = pred["error"]
    log = work / f"{run.name}.inprocess.log"
    child = run_child([sys.executable, "-c", INFER_CHILD, str(run), str(data), args.device], log, args.timeout)
    if "error" in child:
        row["error"] = (row.get("error", "") + "; " if "error" in row else "") + "in-process " + child["error"]
        return row
    inner = json.loads(log.read_text().strip().splitlines()[-1])
    row.update(inprocess_predict_s=inner["predict_s"], inprocess_seq_per_s=n / inner["predict_s"],
               inprocess_load_s=inner["load_s"], inprocess_warmup_s=inner["warmup_s"],
               inprocess_peak_gpu_gib=inner["gpu_peak_gib"], inprocess_peak_rss_gib=child["peak_rss_gib"],
               rc_average=inner["rc_average"], inprocess_one_view_seq_per_s=n / inner["one_view_s"])
    return row


# -- tables ----------------------------------------------------------------------------------------------------------
def spread(values: list[float], scale: float = 100.0) -> str:
    """mean +- sample standard deviation (x ``scale``) of the values given; one value alone."""
    values = [scale * v for v in values if v is not None]
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f}"


def short(text: str, width: int = 160) -> str:
    """An error line cut for a table cell (the JSON keeps it whole)."""
    return text if len(text) <= width else text[:width - 3] + "..."


def mean_of(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def fmt(value, spec: str = ".2f") -> str:
    return "" if value is None else format(value, spec)


def recipe(runs: list[dict]) -> str:
    r = next((r for r in runs if r.get("mixer")), None)
    if r is None:
        return ""
    stem = f", stem pooled x{r['stem_pool']}" if (r.get("stem_pool") or 1) > 1 else ""
    crop = f", centre crops from {r['crop_min_bp']:,} bp" if r.get("crop_min_bp") else ""
    return f"{r['mixer']}, k {r['k']} / stride {r['stride']}{stem}{crop}, {r['n_layers']} x {r['d_model']}"


def write_tables(args, meta: dict, genomes_counts: dict, rows: list[dict], baselines: dict, speed: list[dict]) -> str:
    """PREFIX.json and PREFIX.md of what is done so far (rewritten as rows finish: a call cut short keeps them);
    returns the markdown."""
    lines = [*heading("Central-promoter classification at long context", meta,
                      f"{meta['device'] if args.device == 'cuda' else meta['cpu']} ({meta['cpu_count']} CPUs), torch "
                      f"{meta['torch']}, genolin {meta['genolin']}; preset {args.preset or 'genolin default'}, seeds "
                      f"{','.join(map(str, args.seeds))}"
                      + (f", {args.max_minutes} min per run" if args.max_minutes else "")
                      + (f", --set {' '.join(args.set)}" if args.set else "")),
             "Examples per genome (centres shared by every length; at most "
             f"{args.max_per_genome} per class, centres of one class at least {args.min_spacing} bp apart):", "",
             "| genome | TSSs | positives available | negative centre positions (gaps) | candidates | positives | "
             "negatives |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in genomes_counts.items():
        lines.append(f"| {name} ({GENOMES[name][2]}) | {c['tss']:,} | {c['positives_available']:,} | "
                     f"{c['negative_positions']:,} ({c['negative_gaps']}) | {c['negatives_available']:,} | "
                     f"{c['positives']:,} | {c['negatives']:,} |")
    if rows or baselines:
        lines += ["", "## Test on the held-out genome (trained on the other two)", "",
                  "MCC, AUROC x 100 and accuracy %, mean +- sample sd over seeds. genolin decides at the threshold "
                  "its run chose on dev (max MCC); the k-mer LR (the central 1 kb of the same windows) at 0.5 and, "
                  "in brackets, at its own max-MCC dev threshold, the one `genolin - LR` compares with. Epochs: "
                  "completed ones (steps: optimizer steps). Best: the epoch whose weights each run kept (best dev "
                  "MCC), with the runs the trainer found memorising (dev not improved for 3 epochs while the training "
                  "loss fell by a quarter). Train s: wall seconds of `genolin train`; tokens/s and "
                  "seq/s: mean over the runs' last completed epochs; peak: the trainer's peak memory (GiB; CUDA "
                  "tensors on a GPU, peak RSS on CPU). Test s: wall seconds of `genolin evaluate` ("
                  + ("one view: the sequences as given, --one-view)." if args.one_view else
                     "its default views: both strands and shifts for runs trained with reverse complements)."),
                  "", "| held out | L (bp) | model | MCC | AUROC | accuracy | LR MCC | genolin - LR MCC | train s | "
                  "epochs (steps) | best (memorising) | tokens/s | seq/s | peak GiB | test s | test n (pos) | "
                  "failures |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for held in args.held_out:
        b = baselines.get(held)
        for r in (r for r in rows if r["held_out"] == held):
            ok = [g for g in r["genolin"] if "test_mcc" in g]
            last = [g["epochs"][-1] for g in r["genolin"] if g.get("epochs")]
            seq_s = [e["sequences_per_s"] or r["n_train"] / e["seconds"] for e in last if e["seconds"]]
            peaks = [e["peak_memory_gib"] for e in last if e["peak_memory_gib"] is not None]
            if not peaks and args.device == "cpu":
                peaks = [g["train_peak_rss_gib"] for g in r["genolin"] if g.get("train_peak_rss_gib") is not None]
            mcc = mean_of(g["test_mcc"] for g in ok)
            lr = f"{100 * b['test_mcc']:.2f} ({100 * b['test_mcc_dev_threshold']:.2f})" if b else ""
            fails = "; ".join(f"seed {g['seed']}: {short(g['error'])}" for g in r["genolin"] if "error" in g)
            lines.append(
                f"| {held} | {r['length']:,} | {recipe(r['genolin'])} | {spread([g['test_mcc'] for g in ok])} | "
                f"{spread([g['test_auroc'] for g in ok])} | {spread([g['test_accuracy'] for g in ok])} | "
                f"{lr} | "
                f"{fmt(100 * (mcc - b['test_mcc_dev_threshold']) if b and mcc is not None else None, '+.2f')} | "
                f"{fmt(mean_of(g.get('train_seconds') for g in r['genolin']), '.0f')} | "
                f"{fmt(mean_of(len(g['epochs']) for g in r['genolin']), '.1f')} "
                f"({fmt(mean_of(g.get('steps') for g in r['genolin']), '.0f')}) | {best_epochs(r['genolin'])} | "
                f"{fmt(mean_of(e['tokens_per_s'] for e in last), ',.0f')} | {fmt(mean_of(seq_s), '.2f')} | "
                f"{fmt(max(peaks) if peaks else None, '.2f')} | "
                f"{fmt(mean_of(g.get('evaluate_seconds') for g in r['genolin']), '.0f')} | "
                f"{r['n_test']} ({r['n_test_pos']}) | "
                f"{fails.replace('|', '/')} |")
        if b:
            cells = [held, "central 1,000", f"k-mer LR (k 1..6, C {b['C']:g} on dev)",
                     f"{100 * b['test_mcc']:.2f} ({100 * b['test_mcc_dev_threshold']:.2f})",
                     f"{100 * b['test_auroc']:.2f}", f"{100 * b['test_accuracy']:.2f}", "", "", f"{b['seconds']:.0f}",
                     "", "", "", "", "", "", f"{b['n_test']} ({b['n_test_pos']})", ""]
            lines.append("| " + " | ".join(cells) + " |")
    scored_at = [(r, g) for r in rows for g in r["genolin"] if g.get("test_at")]
    if scored_at:
        lines += ["", "The same models scored on the test windows cut to other lengths around the same centres "
                  "(--score-lengths): AUROC x 100 per seed.", "",
                  "| held out | trained at L (bp) | scored at (bp) | AUROC | scored at L |",
                  "|---|---:|---:|---:|---:|"]
        for r in rows:
            for other in args.score_lengths:
                got = [g for g in r["genolin"] if str(other) in g.get("test_at", {})]
                if got:
                    lines.append(f"| {r['held_out']} | {r['length']:,} | {other:,} | "
                                 + ", ".join(fmt(100 * (g["test_at"][str(other)]["auroc"] or 0), ".1f") for g in got)
                                 + " | " + ", ".join(fmt(100 * (g.get("test_auroc") or 0), ".1f") for g in got) + " |")
    if rows:
        lines += ["", "Mean over the held-out genomes (each genome's mean over seeds; genomes with a result):", "",
                  "| L (bp) | genomes | MCC | AUROC | accuracy | k-mer LR MCC (same genomes) | LR AUROC |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for length in args.lengths:
            per = []
            for r in rows:
                ok = [g for g in r["genolin"] if "test_mcc" in g]
                if r["length"] == length and ok:
                    per.append((r["held_out"], *(mean_of(g[k] for g in ok)
                                                 for k in ("test_mcc", "test_auroc", "test_accuracy"))))
            bl = [baselines[h] for h, *_ in per if h in baselines]
            lines.append(f"| {length:,} | {len(per)} | "
                         + " | ".join(fmt(100 * v if v is not None else None)
                                      for v in (mean_of(p[i] for p in per) for i in (1, 2, 3)))
                         + f" | {fmt(100 * mean_of(b['test_mcc'] for b in bl) if bl else None)} | "
                         f"{fmt(100 * mean_of(b['test_auroc'] for b in bl) if bl else None)} |")
    if speed:
        lines += ["", "## Speed and memory on random sequences", "",
                  "Training: `genolin train --epochs 2 --set crop_min_bp=0` (whole sequences) on N random sequences "
                  "(validated on the same): the second "
                  "epoch's sequences/s (its training seconds, without validation) and the trainer's peak memory "
                  "(CUDA tensors on a GPU, peak RSS on CPU); RSS columns: a process's peak resident memory (wait4). "
                  "Inference, with the views `genolin predict` uses by default (both strands and shifts for runs "
                  "trained with reverse complements): `genolin predict` wall time including start-up, and in-process "
                  "`sequence_probs` after a warm-up (peak GPU memory: torch.cuda.max_memory_allocated), and the "
                  "same with one view (the sequences as given).", "",
                  "| L (bp) | N | model | train seq/s | train s/seq | train tokens/s | train peak memory GiB | "
                  "train peak RSS GiB | predict wall s | predict seq/s | predict peak RSS GiB | in-process s/seq | "
                  "in-process one view seq/s | in-process peak GPU GiB | in-process peak RSS GiB | failure |",
                  "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for s in speed:
            per_seq = 1 / s["train_seq_per_s"] if s.get("train_seq_per_s") else None
            inner = 1 / s["inprocess_seq_per_s"] if s.get("inprocess_seq_per_s") else None
            lines.append(f"| {s['length']:,} | {s['n']} | {recipe([s])} | {fmt(s.get('train_seq_per_s'), '.3f')} | "
                         f"{fmt(per_seq, '.2f')} | {fmt(s.get('train_tokens_per_s'), ',.0f')} | "
                         f"{fmt(s.get('train_peak_memory_gib'))} | {fmt(s.get('train_peak_rss_gib'))} | "
                         f"{fmt(s.get('predict_wall_s'), '.1f')} | {fmt(s.get('predict_seq_per_s'), '.3f')} | "
                         f"{fmt(s.get('predict_peak_rss_gib'))} | {fmt(inner, '.3f')} | "
                         f"{fmt(s.get('inprocess_one_view_seq_per_s'), '.1f')} | "
                         f"{fmt(s.get('inprocess_peak_gpu_gib'))} | {fmt(s.get('inprocess_peak_rss_gib'))} | "
                         f"{short(s.get('error', '')).replace('|', '/')} |")
    lines += ["", "## Design document 000", "",
              "Reference figures of design document 000 (../shared/design/000-linear-attention-handbook.md, \"DNA "
              "Sequence Analysis (Human Genome)\"), quoted as written; it names no hardware, data set or source, "
              "reports accuracy (compare the accuracy column; MCC is not given there) and a time and memory per "
              "sequence without saying whether that is training or inference:", "", "```", DESIGN_000, "```", ""]
    text = "\n".join(lines)
    write_result(str(Path(args.out)), {"meta": meta, "genomes": genomes_counts, "rows": rows, "baselines": baselines,
                                       "speed": speed, "design_document_000": DESIGN_000}, text, default=str)
    return text


# -- main ------------------------------------------------------------------------------------------------------------
QUICK = {"lengths": "1000,10000", "max_per_genome": 200, "seeds": "0", "max_minutes": 2.0, "speed_lengths": "100000"}
FULL = {"lengths": "1000,10000,100000", "max_per_genome": 2000, "seeds": "0,1,2", "max_minutes": None,
        "speed_lengths": "100000,1000000"}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="the shared data folder")
    ap.add_argument("--lengths", default=None, help=f"window lengths in bp (default {FULL['lengths']})")
    ap.add_argument("--held-out", default=",".join(GENOMES), help="genomes held out in turn (comma-separated)")
    ap.add_argument("--max-per-genome", type=int, default=None,
                    help=f"examples per genome and class at most (default {FULL['max_per_genome']})")
    ap.add_argument("--min-spacing", type=int, default=0, metavar="BP",
                    help="least distance between two window centres of one class in a genome (default 0: any "
                         "distinct positions, so windows of one TSS cluster or one TSS-free gap overlap; with 100, "
                         "C. jejuni's 36 TSS-free gaps give only 377 negatives, fewer than its positives)")
    ap.add_argument("--data-seed", type=int, default=0, help="seed of the window draws")
    ap.add_argument("--data-dir", default=str(REPO / ".bench_data" / "long_context"),
                    help="folder for the CSVs (files already there are reused)")
    ap.add_argument("--seeds", default=None, help=f"training seeds (default {FULL['seeds']})")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--preset", default=None, help="genolin preset (default: genolin's own)")
    ap.add_argument("--max-minutes", type=float, default=None, help="training time limit per run (default none)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for every training")
    ap.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="kill any genolin command running longer than this (recorded as a failure)")
    ap.add_argument("--one-view", action="store_true",
                    help="score test sequences as given only (no reverse complements or shifts): 8x faster")
    ap.add_argument("--jobs", type=int, default=1, help="genolin runs at once (several share one GPU well)")
    ap.add_argument("--score-lengths", default="", metavar="BP,...",
                    help="also score every trained model on the test windows cut to these lengths around the same "
                         "centres (e.g. a 100 kb model on the central 1 kb: is the long context what it misses?)")
    ap.add_argument("--skip-train", action="store_true", help="data and baseline only (and --speed if given)")
    ap.add_argument("--speed", action="store_true", help="also measure speed and memory on random sequences")
    ap.add_argument("--speed-lengths", default=None, help=f"lengths for --speed (default {FULL['speed_lengths']})")
    ap.add_argument("--speed-n", default=None,
                    help="sequences per speed length: one number, or one per length (default: 8 at 100 kbp, 2 at "
                         "1 Mbp: max(2, min(8, 800,000 / L)))")
    ap.add_argument("--speed-format", default="csv", choices=["csv", "fasta"],
                    help="file type of the speed inputs (fasta: labelled records, no CSV cell limit)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: lengths 1000,10000, 200 per class, seed 0, 2 min per run, speed at 100 kbp "
                         "(options given explicitly still win)")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary folder)")
    ap.add_argument("--out", default=None, help="output prefix (default benchmarks/results/long_context_DEVICE)")
    args = ap.parse_args()
    fill_defaults(args, QUICK if args.quick else FULL)
    args.lengths = [int(v) for v in str(args.lengths).split(",")]
    args.score_lengths = [int(v) for v in args.score_lengths.split(",") if v]
    args.seeds = [int(v) for v in str(args.seeds).split(",")]
    args.held_out = args.held_out.split(",")
    args.speed_lengths = [int(v) for v in str(args.speed_lengths).split(",")]
    if args.speed_n is None:
        args.speed_n = [max(2, min(8, 800_000 // n)) for n in args.speed_lengths]
    else:
        args.speed_n = [int(v) for v in args.speed_n.split(",")]
        args.speed_n = args.speed_n * len(args.speed_lengths) if len(args.speed_n) == 1 else args.speed_n
        if len(args.speed_n) != len(args.speed_lengths):
            raise SystemExit("--speed-n: one number, or one per --speed-lengths")
    bad = [g for g in args.held_out if g not in GENOMES]
    if bad:
        raise SystemExit(f"--held-out {','.join(bad)}: not one of {', '.join(GENOMES)}")
    args.out = args.out or str(REPO / "benchmarks" / "results" / f"long_context_{args.device}")
    return args


def metadata(args) -> dict:
    try:
        import torch

        torch_version = torch.__version__
        device = torch.cuda.get_device_name() if args.device == "cuda" else platform.machine()
    except Exception as exc:  # the table still gets written without it
        torch_version, device = f"unknown ({exc})", args.device
    try:
        from genolin import __version__
    except Exception as exc:  # genolin mid-edit: its runs will say more
        __version__ = f"unknown ({exc})"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"benchmark": "long_context", "date": now(),
            "genolin": __version__, "torch": torch_version, "python": platform.python_version(), "device": device,
            "cpu": cpu or platform.machine(), "cpu_count": os.cpu_count(), "host": platform.node(),
            "command": command("long_context"), "args": vars(args)}


def main() -> None:
    args = parse_args()
    shared = Path(args.shared)
    work = work_folder(args.work, "long_context_")
    fit_bp = max(MIN_FIT_BP, *args.lengths)
    data_dir = (Path(args.data_dir) / f"seed{args.data_seed}_max{args.max_per_genome}_spacing{args.min_spacing}"
                f"_fit{fit_bp}")
    genomes, counts = {}, {}
    for name, (fasta, bed, _) in GENOMES.items():  # every genome: each one trains when another is held out
        if not (shared / fasta).exists() or not (shared / bed).exists():
            raise SystemExit(f"{shared / fasta} or {shared / bed}: not found (give --shared, the shared data folder)")
        genomes[name] = genome_examples(name, shared, fit_bp, args.max_per_genome, args.data_seed, args.min_spacing)
        counts[name] = c = genomes[name]["counts"]
        print(f"{name}: {c['tss']:,} TSSs; {c['positives_available']:,} positive centres available, "
              f"{c['negative_positions']:,} negative centre positions in {c['negative_gaps']} gaps "
              f"({c['negatives_available']:,} candidates); using {c['positives']:,} positives, "
              f"{c['negatives']:,} negatives", flush=True)
    splits = prepare_data(args, genomes, data_dir)
    ignore = Path(args.data_dir) / ".gitignore"
    if not ignore.exists():  # the genomes' licences keep their sequences out of the repository
        ignore.write_text("*\n")
    meta = metadata(args)
    meta["data_dir"] = str(data_dir)
    pool = ThreadPoolExecutor(max(1, args.jobs))  # each job is a subprocess: threads only wait
    futures = {} if args.skip_train else {
        (h, n, s): pool.submit(genolin_run, args, splits[(h, n)], h, n, s, work)
        for h in args.held_out for n in args.lengths for s in args.seeds}
    rows, baselines, speed = [], {}, []
    t0 = time.perf_counter()  # the regressions run here while the pool trains
    central = {name: kmer_features([window(g, ex, CENTRAL_BP) for ex in g["examples"]])
               for name, g in genomes.items()}
    for held in args.held_out:
        baselines[held] = b = kmer_baseline(genomes, held, central)
        print(f"{held:10s} k-mer LR (central 1 kb, C {b['C']:g}): test MCC x100 {100 * b['test_mcc']:6.2f}, AUROC "
              f"x100 {100 * b['test_auroc']:6.2f}", flush=True)
    print(f"baselines: {time.perf_counter() - t0:.0f} s", flush=True)
    write_tables(args, meta, counts, rows, baselines, speed)
    for held in args.held_out:
        for length in args.lengths:
            if args.skip_train:
                continue
            c = splits[(held, length)]["counts"]
            row = {"held_out": held, "length": length, "n_train": c["train"]["n"], "n_dev": c["dev"]["n"],
                   "n_test": c["test"]["n"], "n_test_pos": c["test"]["positives"], "genolin": []}
            rows.append(row)
            for seed in args.seeds:
                r = futures[(held, length, seed)].result()
                row["genolin"].append(r)
                result = (f"test MCC x100 {100 * r['test_mcc']:6.2f}, AUROC x100 {100 * r['test_auroc']:6.2f}"
                          if "test_mcc" in r else f"FAILED: {r['error']}")
                recipe_text = f"; {recipe([r])}" if r.get("mixer") else ""
                print(f"{held:10s} L {length:>9,} seed {seed}: {result} ({r.get('train_seconds', 0):.0f} s"
                      f"{recipe_text})", flush=True)
            write_tables(args, meta, counts, rows, baselines, speed)
    pool.shutdown()
    if args.speed:
        for length, n in zip(args.speed_lengths, args.speed_n, strict=True):
            s = speed_row(args, length, n, work)
            speed.append(s)
            failed = f"; FAILED: {s['error']}" if "error" in s else ""
            print(f"speed L {length:,} N {n}: train {fmt(s.get('train_seq_per_s'), '.3f')} seq/s, predict "
                  f"{fmt(s.get('predict_seq_per_s'), '.3f')} seq/s{failed}", flush=True)
            write_tables(args, meta, counts, rows, baselines, speed)
    print(write_tables(args, meta, counts, rows, baselines, speed))


if __name__ == "__main__":
    main()
