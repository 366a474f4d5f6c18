"""Where a training step's time goes, and the training speed each preset reaches: tokens per second, model FLOP
utilisation, and a torch.profiler table of the steps.

Each row builds the real ``Trainer`` of a recipe (the base and small track presets on the given genomes; base's
long-sequence classifier recipe on 100-kbp sequences cut from them), runs one warm-up epoch (Triton's compiles, a
CUDA graph's capture, the allocator's growth) and times a second epoch of --steps optimizer steps: wall clock per
step, tokens per second, model TFLOP/s (6 x parameters x encoder positions: the dense estimate of a forward and
backward; a stem pooling p bases into a position divides the tokens by p) and
its share of the card's dense bf16 peak (MFU; H100/H200 SXM 989 TFLOP/s). Then torch.profiler over --profile-steps
more steps: the host time of the training loop's ranges (genolin.make_batch on its worker thread, genolin.forward,
genolin.backward, genolin.optimizer, genolin.graphed_step) and the ops that take the most host and device time,
with the device's busy share (kernel time over wall time). --variant eager sets GENOLIN_CUDA_GRAPHS=0 (every step
launched op by op); the default variants run eager and graphed steps in the same run. Works against an older tree
(PYTHONPATH=OLD/) for the profile before a change: it uses only ``Trainer``, ``epoch_batches`` and
``train_epoch``.

    python benchmarks/train_profile.py --device cuda --out benchmarks/results/train_profile/h100
    PYTHONPATH=old python benchmarks/train_profile.py --device cuda --variant eager --out $OUT/before
    python benchmarks/train_profile.py --device cpu --recipe tiny --steps 5 --profile-steps 2 --out /tmp/tp

Writes PREFIX.json, PREFIX.md (the tables) and PREFIX_<recipe>_<variant>.txt (the profiler's tables).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: an older tree given there wins
from common import sync, timed, versions, write_result  # noqa: E402

from genolin.config import DataSpec, Setting  # noqa: E402
from genolin.io.fasta import read_fasta  # noqa: E402
from genolin.train import Trainer, configure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ECOLI = (str(ROOT / "data/ecoli_k12/NC_000913.3.fa.bgz"), str(ROOT / "data/ecoli_k12/gene_starts.bed"))
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0}  # dense bf16, SXM
RANGES = ("genolin.make_batch", "genolin.forward", "genolin.backward", "genolin.optimizer", "genolin.graphed_step")
# recipe -> (preset, task, long sequences)
RECIPES = {"base": ("base", "track", False), "small": ("small", "track", False), "tiny": ("tiny", "track", False),
           "base_long": ("base", "sequence", True)}


def long_csv(fastas: list[str], out: Path, n: int, length: int, seed: int = 0) -> str:
    """A CSV of ``n`` sequences of ``length`` bp cut at random from the genomes, labels 0 and 1 in turn."""
    rng = random.Random(seed)
    seqs = [r.seq for f in fastas for r in read_fasta(f) if len(r.seq) > length]
    rows = ["sequence,label"]
    for i in range(n):
        s = seqs[i % len(seqs)]
        a = rng.randrange(len(s) - length)
        rows.append(f"{s[a:a + length].decode()},{i % 2}")
    out.write_text("\n".join(rows) + "\n")
    return str(out)


def make_trainer(recipe: str, pairs: list[tuple[str, str]], args, work: Path) -> Trainer:
    preset, task, long = RECIPES[recipe]
    if long:
        steps_sequences = 2 * args.steps  # 2 sequences of 100 kbp a batch (max_tokens 2^18)
        spec = DataSpec(task="sequence", csv=long_csv([f for f, _ in pairs], work / "long.csv", steps_sequences,
                                                      args.long_bp))
        settings = [Setting("patience", 0, "benchmark")]
    else:
        spec = DataSpec(task="track", fasta=[f for f, _ in pairs], tss=[t for _, t in pairs])
        settings = [Setting("val_every_steps", args.steps, "benchmark"), Setting("patience", 0, "benchmark")]
    settings += [Setting(k, yaml_value(v), "--set") for k, v in (kv.split("=", 1) for kv in args.set)]
    cfg = configure(preset, settings, spec)
    return Trainer(cfg, spec, work / "run", device=args.device, progress=False)


def yaml_value(text: str):
    """A --set value as YAML reads it (numbers, booleans, null; else the string)."""
    import yaml

    return yaml.safe_load(text)


def epoch(trainer: Trainer) -> dict:
    """One training epoch (no validation) -> its record; with the kernels ``Trainer.fit`` would choose (cropped
    sequences without cuDNN, where this genolin has ``shape_free_kernels``)."""
    try:
        from genolin.device import shape_free_kernels

        kernels = shape_free_kernels(trainer.device, enabled=trainer.task.varied_shapes())
    except (ImportError, AttributeError):  # an older genolin (a "before" run)
        kernels = contextlib.nullcontext()
    with kernels:
        record, _ = trainer.train_epoch()
    trainer.state["epoch"], trainer.state["batch"] = trainer.state["epoch"] + 1, 0
    return record


def profile_tables(trainer: Trainer, args, path: Path) -> dict:
    """torch.profiler over one short epoch: the loop's ranges (host ms a step), the device's busy share, and the
    top ops written to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    saved = trainer.cfg
    if saved.val_every_steps:  # a track epoch of profile_steps steps (a classifier's: one pass, as timed)
        trainer.cfg = dataclasses.replace(saved, val_every_steps=args.profile_steps)
    sync(args.device)
    step0, t0 = trainer.state["step"], time.perf_counter()
    with profile(activities=acts) as prof:
        epoch(trainer)
        sync(args.device)
    wall = time.perf_counter() - t0
    trainer.cfg = saved
    averages = prof.key_averages()
    steps = max(1, trainer.state["step"] - step0)
    ranges = {e.key: e.cpu_time_total / 1e3 / steps for e in averages if e.key in RANGES}
    device_us = sum(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) for e in averages)
    lines = [f"# {path.stem}: {steps} steps profiled, {wall:.3f} s wall", "",
             averages.table(sort_by="self_cpu_time_total", row_limit=25)]
    if args.device.startswith("cuda"):
        lines += ["", averages.table(sort_by="self_cuda_time_total", row_limit=25)]
    path.write_text("\n".join(lines) + "\n")
    return {"ranges_ms_per_step": ranges, "device_busy": device_us / 1e6 / wall if wall else None,
            "profiled_steps": steps}


def row(recipe: str, variant: str, pairs, args, prefix: Path) -> dict:
    if variant == "eager":
        os.environ["GENOLIN_CUDA_GRAPHS"] = "0"
    else:
        os.environ.pop("GENOLIN_CUDA_GRAPHS", None)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(recipe, pairs, args, Path(tmp))
        try:
            trainer.schedule.start(len(trainer.epoch_batches(0)))
            trainer.model.train()
            epoch(trainer)  # warm-up
            if args.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            step0 = trainer.state["step"]
            wall, record = timed(lambda: epoch(trainer), args.device)
            steps = trainer.state["step"] - step0
            tokens_s = record["tokens_per_s"] * record["seconds"] / wall  # the record's tokens over the synced wall
            params = trainer.model.n_parameters()
            # the encoder's positions: a stem pooling groups of p bases (the long recipe) runs the blocks on 1/p
            tflops = 6 * params * tokens_s / getattr(trainer.model.cfg, "stem_pool", 1) / 1e12
            peak = next((v for k, v in PEAK_TFLOPS.items() if k in args.gpu), None)
            out = {"recipe": recipe, "variant": variant, "steps": steps, "ms_per_step": 1e3 * wall / steps,
                   "tokens_per_step": tokens_s * wall / steps, "tokens_per_s": tokens_s, "parameters": params,
                   "model_tflops": tflops, "mfu": tflops / peak if peak else None,
                   "graphed": bool(getattr(trainer, "graphed", None) and trainer.graphed.graph is not None),
                   "peak_gpu_gib": (torch.cuda.max_memory_allocated() / 2**30
                                    if args.device.startswith("cuda") else None),
                   "train_loss": record["train_loss"]}
            if args.profile_steps:
                out.update(profile_tables(trainer, args, Path(f"{prefix}_{recipe}_{variant}.txt")))
                # its worker thread's ranges are not in the profile: batch making timed alone, on this thread
                batches = trainer.epoch_batches(trainer.state["epoch"])[:args.profile_steps]
                t0 = time.perf_counter()
                for b, items in enumerate(batches):
                    trainer.make_batch(items, trainer.state["epoch"], b) if hasattr(trainer, "make_batch") else \
                        trainer.task.collate(items, None)
                out["ranges_ms_per_step"]["genolin.make_batch"] = 1e3 * (time.perf_counter() - t0) / len(batches)
            out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            return out
        finally:
            trainer.close()


def table(rows: list[dict]) -> str:
    head = ("| recipe | steps | graphed | ms / step | tokens / step | M tokens/s | model TFLOP/s | MFU | device busy "
            "| host ms / step: batch, forward, backward, optimizer, graphed step | peak GPU GiB |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        rng = r.get("ranges_ms_per_step", {})
        host = ", ".join(f"{rng[k]:.1f}" if k in rng else "-" for k in RANGES)
        mfu = f"{100 * r['mfu']:.1f} %" if r.get("mfu") is not None else "-"
        busy = f"{100 * r['device_busy']:.0f} %" if r.get("device_busy") is not None else "-"
        gpu = f"{r['peak_gpu_gib']:.2f}" if r.get("peak_gpu_gib") is not None else "-"
        lines.append(f"| {r['recipe']} | {r['steps']} | {'yes' if r['graphed'] else 'no'} | {r['ms_per_step']:.1f} | "
                     f"{r['tokens_per_step']:,.0f} | {r['tokens_per_s'] / 1e6:.3f} | {r['model_tflops']:.1f} | {mfu} | "
                     f"{busy} | {host} | {gpu} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--recipe", action="append", choices=list(RECIPES), help="default: base, small, base_long")
    p.add_argument("--variant", action="append", choices=["eager", "default"],
                   help="eager: GENOLIN_CUDA_GRAPHS=0; default: as shipped (default: both)")
    p.add_argument("--fasta", action="append", help="training genomes (default: the bundled E. coli)")
    p.add_argument("--tss", action="append", help="their TSS BED files, in order")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps timed (and warmed up first)")
    p.add_argument("--profile-steps", type=int, default=20, help="steps under torch.profiler (0: none)")
    p.add_argument("--long-bp", type=int, default=100_000, help="length of the long recipe's sequences")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a training setting for every row (e.g. crop_min_bp=0: the long recipe at full length)")
    p.add_argument("--out", required=True, help="output prefix")
    args = p.parse_args()
    pairs = list(zip(args.fasta, args.tss, strict=True)) if args.fasta else [ECOLI]
    args.gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    prefix = Path(args.out)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for recipe in args.recipe or ["base", "small", "base_long"]:
        for variant in args.variant or ["eager", "default"]:
            rows.append(row(recipe, variant, pairs, args, prefix))
            print(json.dumps(rows[-1]), flush=True)
    meta = {**versions("train_profile"), "device": args.gpu, "command": " ".join(["python", *sys.argv]),
            "genomes": [Path(f).name for f, _ in pairs], "settings": args.set}
    text = table(rows)
    write_result(prefix, {"meta": meta, "rows": rows}, f"# train_profile, {meta['device']}, {meta['date']}\n\n"
                 f"`{meta['command']}`\n\n{text}\n", indent=1)
    print(text)


if __name__ == "__main__":
    main()
