"""Genome prediction speed: `genolin predict` of a track model over a genome, Mbp per second.

Each row runs `genolin -q predict --model RUN --fasta GENOME --out P` in a fresh process and times it two ways:
wall clock of the whole command (start-up, model load and writing included; what a user waits for) and the
prediction alone after the model is loaded (the `predict` library call, reported by the child). Their difference is
the fixed cost (start-up, load, exit: what does not scale with the genome); the prediction over the Mbp is the
cost per Mbp. Peak resident
memory (RSS) of the child comes from wait4. The rows cover --rc-average off and on, bedGraph and bigWig, and the
PyTorch reference attention (GENOLIN_ATTENTION_BACKEND=reference) beside the default backend for the ratio.

The model: --model RUN, or a run of --preset trained for one step on the bundled E. coli genome (speed does not
depend on the weights). The genome: --fasta (default the bundled E. coli K-12, 4.64 Mbp), tiled to at least
--mbp megabases when given (real sequence; contigs tile1, tile2, ...).

    python benchmarks/predict_speed.py --preset tiny --device cpu --out benchmarks/results/predict_speed/cpu
    python benchmarks/predict_speed.py --preset base --device cuda --mbp 100 --out $OUT/predict_speed_h200
    python benchmarks/predict_speed.py --preset base --set stride=1 --device cuda --mbp 100 --out $OUT/stride1

Writes PREFIX.json (settings, machine, versions, date, rows) and PREFIX.md (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, command, heading, run_child, versions, work_folder, write_result  # noqa: E402

from genolin.bench import cpu_name  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz"
ECOLI_TSS = REPO / "data" / "ecoli_k12" / "gene_starts.bed"

CHILD = """
import sys, time, json
t0 = time.perf_counter()
from genolin.config import DataSpec
from genolin.inference import load_run
from genolin.predict import PredictOptions, predict
model, fasta, out, device, rc, fmt, batch, compiled, window = sys.argv[1:10]
run = load_run(model, device, batch_size=int(batch) if batch != "0" else None, compile=compiled == "1",
               window_bp=int(window) or None)
import torch
if run.predictor.device.type == "cuda":
    torch.cuda.synchronize()
t1 = time.perf_counter()
if fmt == "none":  # the model pipeline alone: windows, tokens, forward, probabilities; nothing written
    from genolin.tasks.track import TrackData
    data = TrackData.load([fasta], [], run.config.train)
    bins = sum(len(p) for _, _, p in run.predictor.region_probs(data, data.whole(), rc_average=rc == "1",
                                                                 progress=False))
    summary = f"{bins} bins, not written"
else:
    summary = predict(run, DataSpec("track", fasta=[fasta]), out,
                      PredictOptions(rc_average=rc == "1", threshold=0.5, track_format=fmt, progress=False))
t2 = time.perf_counter()
peak = torch.cuda.max_memory_allocated() if run.predictor.device.type == "cuda" else None
print(json.dumps({"load_s": t1 - t0, "predict_s": t2 - t1, "gpu_peak_bytes": peak,
                  "batch_windows": run.predictor.batch_size, "summary": summary}))
"""


def genome_length(fasta: Path) -> int:
    from genolin.io.fasta import Genome

    return sum(Genome(fasta).lengths.values())


def tiled(fasta: Path, mbp: float, work: Path) -> Path:
    """The genome's sequence repeated into contigs of the source length until >= mbp megabases."""
    from genolin.io.fasta import read_fasta

    seqs = [rec.seq for rec in read_fasta(fasta)]
    out = work / f"tiled_{mbp:g}mbp.fa"
    total, n = 0, 0
    with open(out, "wb") as fh:
        while total < mbp * 1e6:
            for s in seqs:
                n += 1
                fh.write(b">tile%d\n" % n)
                fh.write(b"\n".join(s[i:i + 100] for i in range(0, len(s), 100)) + b"\n")
                total += len(s)
    return out


def make_run(preset: str, device: str, work: Path, sets: list[str] = ()) -> Path:
    """A run of ``preset`` with ``sets`` (KEY=VALUE) trained one step on the bundled E. coli genome, in ``work``."""
    run = work / "_".join(["run", preset, *(s.replace("=", "-").replace("/", "-") for s in sets)])
    if not (run / "config.json").exists():
        subprocess.run([*GENOLIN, "train", "--fasta", str(ECOLI), "--tss", str(ECOLI_TSS), "--preset", preset,
                        *(a for kv in sets for a in ("--set", kv)), "--max-steps", "1", "--device", device, "--out",
                        str(run)], check=True)
    return run


def prepare(args, prefix: str) -> tuple[Path, Path, Path, int]:
    """(work folder, run directory, genome FASTA, its length in bp) from --work, --model/--preset, --fasta, --mbp."""
    work = work_folder(args.work, prefix)
    run = Path(args.model) if args.model else make_run(args.preset, args.device, work, getattr(args, "set", []))
    fasta = tiled(Path(args.fasta), args.mbp, work) if args.mbp else Path(args.fasta)
    return work, run, fasta, genome_length(fasta)


def one_row(args, run: Path, fasta: Path, bp: int, *, rc: bool, fmt: str, backend: str, work: Path) -> dict:
    env = dict(os.environ)
    if backend != "auto":
        env["GENOLIN_ATTENTION_BACKEND"] = backend
    out = work / f"pred_{int(rc)}_{fmt}_{backend}"
    cmd = [sys.executable, "-c", CHILD, str(run), str(fasta), str(out), args.device, "1" if rc else "0", fmt,
           str(args.batch_size), "1" if args.compile else "0", str(args.window_bp or 0)]
    wall, stdout, _, rss = run_child(cmd, env)
    child = json.loads(stdout.strip().splitlines()[-1])
    row = {"rc_average": rc, "format": fmt, "backend": backend, "bp": bp, "wall_s": round(wall, 3),
           "load_s": round(child["load_s"], 3), "predict_s": round(child["predict_s"], 3),
           "wall_mbp_s": bp / wall / 1e6, "predict_mbp_s": bp / child["predict_s"] / 1e6,
           "gpu_peak_gib": child["gpu_peak_bytes"] / 2**30 if child["gpu_peak_bytes"] else None,
           "batch_windows": child["batch_windows"], "peak_rss_mib": round(rss, 1)}
    for p in work.glob(out.name + "*"):
        p.unlink()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a track run directory (default: a --preset run trained one step)")
    ap.add_argument("--preset", default="tiny", help="preset of the model made when --model is not given")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the model made when --model is not given (repeat; e.g. stride=1)")
    ap.add_argument("--fasta", default=str(ECOLI), help="genome to predict")
    ap.add_argument("--mbp", type=float, default=None, help="tile the genome to at least this many Mbp")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch-size", type=int, default=0, help="windows per batch (0: predict's default)")
    ap.add_argument("--formats", default="bedgraph,bigwig",
                    help="track formats to time, each without and with --rc-average (the first also for the "
                         "reference attention); 'none' times the model pipeline without writing")
    ap.add_argument("--reference", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the PyTorch reference attention (GENOLIN_ATTENTION_BACKEND=reference)")
    ap.add_argument("--compile", action="store_true",
                    help="predict with --compile (torch.compile; its compile time is in 'predict s')")
    ap.add_argument("--window-bp", type=int, default=None, help="predict --window-bp (default: the training window)")
    ap.add_argument("--work", default=None, help="folder for the run, the tiled genome and outputs")
    ap.add_argument("--out", default="benchmarks/results/predict_speed/latest", help="output prefix")
    args = ap.parse_args()

    work, run, fasta, bp = prepare(args, "predict_speed_")
    formats = args.formats.split(",")
    settings = [(rc, f, "auto") for f in formats for rc in (False, True)]
    if args.reference:
        settings.append((True, formats[0], "reference"))
    result = {"meta": meta_of(args, run, bp), "rows": [], "cli": None}
    for rc, fmt, backend in settings:  # the files are rewritten after every row: a time limit keeps what ran
        row = one_row(args, run, fasta, bp, rc=rc, fmt=fmt, backend=backend, work=work)
        result["rows"].append(row)
        print(f"rc {int(rc)} {fmt:8s} {backend:9s} wall {row['wall_s']:8.2f} s ({row['wall_mbp_s']:6.2f} Mbp/s)  "
              f"predict {row['predict_s']:8.2f} s ({row['predict_mbp_s']:6.2f} Mbp/s)", flush=True)
        write(result, Path(args.out))
    # the exact command a user runs, with its peak memory
    env = dict(os.environ)
    written = [f for f in formats if f != "none"] or ["bedgraph"]
    fmt = ([] if written[0] == "bedgraph" else ["--format", written[0]]) + (["--compile"] if args.compile else []) \
        + (["--window-bp", str(args.window_bp)] if args.window_bp else [])
    wall, _, _, rss = run_child([*GENOLIN, "predict", "--model", str(run), "--fasta", str(fasta), "--device",
                                 args.device, "--out", str(work / "cli"), *fmt], env)
    result["cli"] = {"command": f"genolin predict --model RUN --fasta {fasta.name} --device {args.device} --out P "
                                + " ".join(fmt),
                     "wall_s": round(wall, 3), "wall_mbp_s": bp / wall / 1e6, "peak_rss_mib": round(rss, 1)}
    print(f"CLI: {wall:.2f} s ({bp / wall / 1e6:.2f} Mbp/s), peak RSS {rss:.0f} MiB", flush=True)
    print(write(result, Path(args.out)))


def run_meta(benchmark: str, run: Path, device: str, **machine) -> dict:
    """What a prediction benchmark's JSON says of the machine (and ``machine``), the versions, the command and the
    model of ``run``."""
    import torch

    from genolin.checkpoint import read_run_config

    cfg = read_run_config(run).train
    return {**versions(benchmark), "cpu": cpu_name(), "cpu_count": os.cpu_count(), **machine,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "command": command(benchmark),
            "model": {"d_model": cfg.model.d_model, "n_layers": cfg.model.n_layers, "mixer": cfg.model.mixer,
                      "k": cfg.k, "stride": cfg.stride, "window_bp": cfg.window_bp}}


def meta_of(args, run: Path, bp: int) -> dict:
    meta = run_meta("predict_speed", run, args.device)
    meta["model"] = {"preset": None if args.model else args.preset, "settings": [] if args.model else args.set,
                     **meta["model"]}
    return {**meta, "genome": {"fasta": Path(args.fasta).name, "bp": bp, "tiled_mbp": args.mbp},
            "compile": args.compile, "window_bp": args.window_bp}


def write(result: dict, prefix: Path) -> str:
    """PREFIX.json and PREFIX.md of what has run so far; returns the markdown."""
    meta, rows, cli = result["meta"], result["rows"], result["cli"]
    m, bp = meta["model"], meta["genome"]["bp"]
    lines = [*heading("genolin predict speed", meta,
                      f"{meta['gpu'] or meta['cpu']} ({meta['cpu_count']} CPUs), torch {meta['torch']}, genolin "
                      f"{meta['genolin']}; model {m['preset'] or 'given'}: d_model {m['d_model']}, {m['n_layers']} "
                      f"layers, {m['mixer']}, k {m['k']}, stride {m['stride']}, window {m['window_bp']:,} bp; genome "
                      f"{meta['genome']['fasta']} ({bp / 1e6:.2f} Mbp){'; torch.compile' if meta['compile'] else ''}"
                      f"{f'; windows of {w:,} bp' if (w := meta.get('window_bp')) else ''}"),
             "| RC average | format | attention | wall clock s | Mbp/s (wall) | predict s (after load) | Mbp/s | "
             "fixed s | s per Mbp | GPU peak GiB | peak RSS MiB | windows / batch |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:  # fixed: what does not scale with the genome (start-up, load, exit); s per Mbp: the rest
        gib = f"{r['gpu_peak_gib']:.2f}" if r["gpu_peak_gib"] is not None else ""
        lines.append(f"| {'yes' if r['rc_average'] else 'no'} | {r['format']} | {r['backend']} | {r['wall_s']:.2f} | "
                     f"{r['wall_mbp_s']:.2f} | {r['predict_s']:.2f} | {r['predict_mbp_s']:.2f} | "
                     f"{r['wall_s'] - r['predict_s']:.2f} | {r['predict_s'] / (bp / 1e6):.3f} | {gib} | "
                     f"{r['peak_rss_mib']:.0f} | {r['batch_windows']} |")
    if cli:
        lines += ["", f"`{cli['command']}`: {cli['wall_s']:.2f} s wall clock ({cli['wall_mbp_s']:.2f} Mbp/s, "
                      f"start-up included), peak RSS {cli['peak_rss_mib']:.0f} MiB."]
    write_result(prefix, result, "\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
