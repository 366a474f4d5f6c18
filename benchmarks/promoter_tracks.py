"""Promoter tracks on genomes a model never saw: which window length and mixer transfer, at equal token budgets.

Leave-one-genome-out over the three shared bacterial genomes (E. coli K-12 with RegulonDB 10.9 TSSs, B.
amyloliquefaciens and C. jejuni with Promotech TSSs; ../shared/data, not redistributable): every cell (window x
mixer) trains on two genomes (`genolin train`, several --fasta/--tss) and scores the whole third genome with
`genolin evaluate` (50-bp bins per strand, RC-averaged); the same models also score the eukaryotic slices of
../shared/data/model_organisms (mRNA starts of their GFF as TSS proxies) as a harder test. Every cell gets the same
number of training tokens and tokens per optimizer step (batch = tokens_per_step / window tokens). The 1 kb window
is the short-window baseline of the long-context claim.

    python benchmarks/promoter_tracks.py --parallel 3 --out benchmarks/results/promoter_tracks/h200
    python benchmarks/promoter_tracks.py --windows 1000,8000 --mixers linear,hybrid --tokens 2e7 --device cpu

Writes PREFIX.json (every run: settings, seconds, metrics), PREFIX.md (tables: held-out AUPRC / positive rate per
genome, their mean, the eukaryotic slices) and PREFIX.png (mean held-out AUPRC against window length per mixer).
Runs go to --work (default a temporary folder); a finished training there is reused when the same arguments trained
it (a failed run otherwise), and an evaluation found there is not run again.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, cli_pairs, cli_sets, collect, heading, made_on, run, run_metadata, train_once, write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BACTERIA = {  # name -> (FASTA, TSS BED) under the shared data folder
    "ecoli": ("ecoli_k12/NC_000913.3.fa.bgz", "ecoli_k12/regulondb_10.9_tss.bed"),
    "bacillus": ("bacteria/BACILLUS/BACILLUS.fasta.gz", "bacteria/BACILLUS/BACILLUS.bed"),
    "cjejuni": ("bacteria/CJEJUNI_2/CJEJUNI_2.fasta.gz", "bacteria/CJEJUNI_2/CJEJUNI_2.bed"),
}
EUKARYOTES = ("A.thaliana", "C.elegans", "D.melanogaster")


def gff_starts_bed(gff: Path, fasta: Path, out: Path) -> Path:
    """mRNA 5' ends (gene 5' ends where a file has no mRNA) of a GFF3 as a BED6 of 1-bp TSS proxies, inside the
    FASTA's records."""
    from genolin.io.fasta import read_fasta

    lengths = {rec.name: len(rec) for rec in read_fasta(fasta)}
    rows: dict[str, list] = {"mRNA": [], "gene": []}
    with gzip.open(gff, "rt") as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(f) < 9 or f[2] not in rows or f[6] not in "+-" or f[0] not in lengths:
                continue
            pos = int(f[3]) - 1 if f[6] == "+" else int(f[4]) - 1
            if pos < lengths[f[0]]:
                rows[f[2]].append((f[0], pos, f[6]))
    starts = sorted(set(rows["mRNA"] or rows["gene"]))
    out.write_text("".join(f"{c}\t{p}\t{p + 1}\t.\t0\t{s}\n" for c, p, s in starts))
    return out


def genome_data(shared: Path, work: Path, eukaryotes: bool, who: str) -> dict[str, tuple[str, str]]:
    """name -> (FASTA, TSS BED) of the three bacteria under the shared data folder and, with ``eukaryotes``, of
    the eukaryotic slices (their BEDs of mRNA starts written under ``work``); exits naming what is missing."""
    data = {name: (str(shared / fa), str(shared / bed)) for name, (fa, bed) in BACTERIA.items()}
    missing = [f for pair in data.values() for f in pair if not Path(f).exists()]
    if missing:
        sys.exit(f"{who}: missing {', '.join(missing)} (the shared data folder: --shared)")
    if eukaryotes:
        beds = work / "beds"
        beds.mkdir(parents=True, exist_ok=True)
        folder = shared / "model_organisms" / "data"
        for e in EUKARYOTES:
            fa = folder / f"{e}.fa.gz"
            data[e] = (str(fa), str(gff_starts_bed(folder / f"{e}.gff.gz", fa, beds / f"{e}.bed")))
    return data


def train_command(args, pairs, start: list[str], settings: dict, seed: int, run_dir: Path, more=()) -> list[str]:
    """`genolin train` on (FASTA, BED) ``pairs`` from ``start`` (--preset P, --init RUN) with ``settings`` and the
    options ``more``, on --device for at most --max-minutes, into ``run_dir``."""
    return [*GENOLIN, "train", *cli_pairs(pairs), *start, *cli_sets(settings), *more, "--device", args.device,
            "--seed", str(seed), "--max-minutes", str(args.max_minutes), "--out", str(run_dir)]


def with_sets(settings: dict, sets: list[str]) -> dict:
    """A recipe's settings with every run's --set KEY=VALUE items over them."""
    return {**settings, **dict(s.split("=", 1) for s in sets)}


def evaluate_all(run_dir: Path, evals: dict, data: dict, device: str, log: Path, env: dict | None = None) -> dict:
    """`genolin evaluate --rc-average` of ``run_dir`` into each folder of ``evals`` (name -> ((FASTA, BED), folder);
    None for the eukaryotic slices) that holds no metrics yet -> name -> the metrics' genomes."""
    for pair, out in evals.values():
        if not (out / "metrics.json").exists():
            inputs = cli_pairs([pair] if pair else [data[e] for e in EUKARYOTES])
            run([*GENOLIN, "evaluate", "--model", str(run_dir), *inputs, "--rc-average", "--device", device, "--out",
                 str(out)], log, env)
    return {name: json.loads((out / "metrics.json").read_text())["genomes"] for name, (_, out) in evals.items()}


def run_state(run_dir: Path) -> tuple[dict, list[dict]]:
    """A finished training's trainer state and the records of its metrics.jsonl."""
    return (json.loads((run_dir / "trainer_state.json").read_text()),
            [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()])


def pooled_figures(gm: dict) -> dict:
    """AUPRC, AUROC, the positive rate and AUPRC's ratio to it, over both strands of an evaluated genome."""
    pooled = gm["pooled"]
    return {"auprc": pooled.get("auprc"), "auroc": pooled.get("auroc"), "positive_rate": pooled["positive_rate"],
            "ratio": (pooled.get("auprc") or 0) / max(pooled["positive_rate"], 1e-12)}


def cell(args, data: dict, held_out: str, window: int, mixer: str) -> dict:
    """Train on the two other genomes, evaluate the held-out genome and the eukaryotic slices."""
    work = Path(args.work) / held_out / f"w{window}_{mixer}"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    window_tokens = window // args.stride
    batch = max(1, args.tokens_per_step // window_tokens)
    steps = max(1, int(args.tokens // (batch * window_tokens)))
    settings = {"window_bp": window, "stride": args.stride, "model.mixer": mixer, "batch_size": batch, "steps": steps,
                "val_every_steps": max(1, steps // args.validations), "warmup_steps": min(args.warmup, steps // 4),
                "lr": args.lr, "patience": 0}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = value
    run_dir = work / "run"
    t0 = time.monotonic()
    train_once(train_command(args, [data[name] for name in BACTERIA if name != held_out], ["--preset", args.preset],
                             settings, args.seed, run_dir), run_dir, log)
    train_s = time.monotonic() - t0
    evals = {held_out: (data[held_out], work / "eval_held_out")}
    if args.eukaryotes:
        evals["eukaryotes"] = (None, work / "eval_eukaryotes")
    scored = evaluate_all(run_dir, evals, data, args.device, log)
    state, records = run_state(run_dir)
    row = {"held_out": held_out, "window_bp": window, "mixer": mixer, "settings": settings, "steps": state["step"],
           "train_tokens": state["step"] * batch * window_tokens, "train_seconds": round(train_s, 1),
           "best_val_score": state["best"], "val_scores": [r["val"]["score"] for r in records if r.get("val")]}
    for name, genomes in scored.items():
        row[name] = {g: pooled_figures(gm) for g, gm in genomes.items()}
    print(f"{held_out:9s} {window:>7,} bp {mixer:7s} steps {state['step']:5d}  {train_s:6.0f} s  "
          + "  ".join(f"{g} AUPRC {v['auprc']:.4f} ({v['ratio']:.1f}x)" for g, v in row[held_out].items()),
          flush=True)
    return row


def tables(rows: list[dict], meta: dict) -> str:
    windows = sorted({r["window_bp"] for r in rows})
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    held = list(dict.fromkeys(r["held_out"] for r in rows))
    by = {(r["held_out"], r["window_bp"], r["mixer"]): r for r in rows}
    a = meta["args"]
    lines = [*heading("Promoter tracks, leave one genome out", meta,
                      f"{made_on(meta)}; preset {a['preset']}, stride {a['stride']}, {a['tokens']:.3g} training tokens "
                      f"and {a['tokens_per_step']:,} tokens per step per run, {a['parallel']} runs at once on one "
                      "device"),
             "Held-out genome: pooled AUPRC over both strands of 50-bp bins (RC-averaged), and AUPRC / positive rate.",
             "", "| window | mixer | " + " | ".join(held) + " | mean AUPRC | min ratio |",
             "|---:|---|" + "---:|" * (len(held) + 2)]
    for w in windows:
        for m in mixers:
            cells, aups, ratios = [], [], []
            for h in held:
                r = by.get((h, w, m))
                if r is None:
                    cells.append("-")
                    continue
                v = r[h][next(iter(r[h]))]
                cells.append(f"{v['auprc']:.4f} ({v['ratio']:.1f}x)")
                aups.append(v["auprc"])
                ratios.append(v["ratio"])
            if aups:
                lines.append(f"| {w:,} | {m} | " + " | ".join(cells) + f" | {sum(aups) / len(aups):.4f} | "
                             f"{min(ratios):.1f}x |")
    euk = [r for r in rows if "eukaryotes" in r]
    if euk:
        names = list(euk[0]["eukaryotes"])
        lines += ["", "Eukaryotic slices (mRNA starts as TSS proxies), mean over the models of a cell (one per "
                  "held-out genome): AUPRC (ratio to the positive rate).", "",
                  "| window | mixer | " + " | ".join(names) + " |", "|---:|---|" + "---:|" * len(names)]
        for w in windows:
            for m in mixers:
                rs = [r for r in euk if r["window_bp"] == w and r["mixer"] == m]
                if rs:
                    cells = [f"{sum(r['eukaryotes'][n]['auprc'] for r in rs) / len(rs):.4f} "
                             f"({sum(r['eukaryotes'][n]['ratio'] for r in rs) / len(rs):.1f}x)" for n in names]
                    lines.append(f"| {w:,} | {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for m in dict.fromkeys(r["mixer"] for r in rows):
        pts = {}
        for r in rows:
            if r["mixer"] == m:
                pts.setdefault(r["window_bp"], []).append(next(iter(r[r["held_out"]].values()))["auprc"])
        xs = sorted(pts)
        ax.plot(xs, [sum(pts[x]) / len(pts[x]) for x in xs], marker="o", label=m)
    ax.set_xscale("log")
    ax.set(xlabel="window (bp)", ylabel="mean held-out AUPRC (50-bp bins)", title="leave one genome out")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="the shared data folder")
    p.add_argument("--windows", default="1000,8000,32000,100000", help="window lengths (bp), comma-separated")
    p.add_argument("--mixers", default="linear,hybrid,favor", help="mixers, comma-separated")
    p.add_argument("--held-out", default=",".join(BACTERIA), help="genomes to hold out, comma-separated")
    p.add_argument("--preset", default="small", help="model preset (tiny, small, base)")
    p.add_argument("--stride", type=int, default=2)
    p.add_argument("--tokens", type=float, default=5e7, help="training tokens per run")
    p.add_argument("--tokens-per-step", type=int, default=131_072, help="tokens per optimizer step")
    p.add_argument("--validations", type=int, default=4, help="validations per run")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps (at most a quarter of the run)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more settings for every run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-minutes", type=float, default=15, help="time limit of one training")
    p.add_argument("--no-eukaryotes", dest="eukaryotes", action="store_false")
    p.add_argument("--parallel", type=int, default=1, help="runs at once (on one GPU they share it)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--work", default=None, help="folder for the runs [default: a temporary folder]")
    p.add_argument("--out", default="benchmarks/results/promoter_tracks/latest", help="output prefix")
    args = p.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="promoter_tracks_")

    data = genome_data(Path(args.shared), Path(args.work), args.eukaryotes, "promoter_tracks")
    cells = [(h, int(w), m) for h in args.held_out.split(",") for w in args.windows.split(",")
             for m in args.mixers.split(",")]
    meta = run_metadata("promoter_tracks", vars(args))
    rows, failed = [], []
    out = Path(args.out)

    def write() -> str:  # after every cell, so a time limit keeps what finished
        rows.sort(key=lambda r: (r["window_bp"], r["mixer"], r["held_out"]))
        meta["cells_done"], meta["cells"] = len(rows), len(cells)
        text = tables(rows, meta) if rows else "no run finished\n"
        write_result(out, {"meta": meta, "rows": rows, "failed": failed}, text)
        return text

    with cf.ThreadPoolExecutor(args.parallel) as pool:
        futures = {pool.submit(cell, args, data, *c): c for c in cells}
        for f in cf.as_completed(futures):
            collect(f, futures[f], rows, failed, key="cell")
            text = write()
    if rows:
        plot(rows, out.with_suffix(".png"))
    print(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
