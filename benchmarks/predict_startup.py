"""The fixed cost of `genolin predict` (issue 57 item 3): what a small genome's prediction pays before and around its
batches, each part timed in fresh processes (children of this Python; `-m genolin` for the CLI).

Rows, each the median wall clock of --repeats fresh processes:
- `python -c pass`: the interpreter alone;
- `import torch`; on cuda also `import torch` + the CUDA context (a tensor made on the GPU);
- `genolin --help`: the CLI's own start (click and genolin, no torch);
- load_run: the model's weights on the device (`genolin.inference.load_run`; imports included);
- genome index: the FASTA read and indexed (`TrackData.load`, as predict's `scoring_data`; no torch);
- first batch: load_run, the genome, then the first piece of `Predictor.region_probs` (CUDA graph capture or kernel
  compilation, the pipeline's threads started);
- the whole command `genolin -q predict --model M --fasta G --rc-average --device D --out P`; on a CPU also with
  `--precision float32` (the default runs bfloat16 weights in bfloat16 where the CPU has bfloat16 matrix units).
Rows other than the interpreter's also give, in "inside s", the part timed inside the child (the stage itself,
after the interpreter started). Then the whole command once more with GENOLIN_TIMINGS=1: the offsets from the
process's start at which each stage of that one predict process ended (``genolin.timings.mark``), and the exit.

    python benchmarks/predict_startup.py --device cpu --out benchmarks/results/predict_startup/cpu
    python benchmarks/predict_startup.py --device cuda --out $OUT/predict_startup_h100

Default model: the bundled `bacteria` (its members for the device: bacteria-cpu on cpu, bacteria-base +
bacteria-s1 on cuda; --model overrides with a run directory or a bundled name), default genome the bundled E. coli
K-12 (4.64 Mbp).
Writes PREFIX.json (settings, machine, versions, date, rows, timeline) and PREFIX.md (the tables).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, heading, run_child, work_folder, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ECOLI = next(iter(sorted((ROOT / "data" / "ecoli_k12").glob("*.fa.bgz"))), None)
TIMINGS = "genolin timings: "  # genolin.timings.PREFIX (not imported here: this process stays light)
INSIDE = "startup inside: "  # the line a child prints with the seconds of its stage

LOAD = """
import time, sys
t0 = time.perf_counter()
from genolin.inference import load_run
run = load_run({model!r}, {device!r})
import torch
if run.predictor.device.type == "cuda":
    torch.cuda.synchronize()
print({inside!r}, time.perf_counter() - t0)
"""

INDEX = """
import time
t0 = time.perf_counter()
from genolin.checkpoint import read_run_config
from genolin.models import resolve_model
from genolin.tasks.track_data import TrackData
cfg = read_run_config(resolve_model({model!r}, {device!r})).train
data = TrackData.load([{fasta!r}], [], cfg)
regions = data.whole()
print({inside!r}, time.perf_counter() - t0)
"""

FIRST = """
import time
from genolin.inference import load_run
run = load_run({model!r}, {device!r})
data = run.task.scoring_data([{fasta!r}], [], [])
import torch
cuda = run.predictor.device.type == "cuda"
if cuda:
    torch.cuda.synchronize()
t0 = time.perf_counter()
pieces = run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False, ahead=True)
next(pieces)
if cuda:
    torch.cuda.synchronize()
print({inside!r}, time.perf_counter() - t0)
pieces.close()
"""


def inside_of(stdout: str) -> float | None:
    for line in stdout.splitlines():
        if line.startswith(INSIDE):
            return float(line[len(INSIDE):])
    return None


def row(name: str, cmd: list[str], env: dict, repeats: int) -> dict:
    walls, insides = [], []
    for _ in range(repeats):
        wall, stdout, _, _ = run_child(cmd, env, ROOT)
        walls.append(wall)
        if (inside := inside_of(stdout)) is not None:
            insides.append(inside)
    r = {"part": name, "wall_s": statistics.median(walls), "walls_s": [round(w, 3) for w in walls],
         "inside_s": statistics.median(insides) if insides else None}
    print(f"{name:58s} {r['wall_s']:7.2f} s" + (f"   inside {r['inside_s']:6.2f} s" if insides else ""), flush=True)
    return r


def timeline(cmd: list[str], env: dict) -> tuple[list[dict], float]:
    """One predict with GENOLIN_TIMINGS=1: [{stage, s from the start}], the whole command's wall seconds."""
    env = dict(env, GENOLIN_TIMINGS="1")
    start = time.time()
    wall, _, stderr, _ = run_child(cmd, env, ROOT)
    stages = []
    for line in stderr.splitlines():
        if line.startswith(TIMINGS):
            stage, _, stamp = line[len(TIMINGS):].rpartition(" ")
            stages.append({"stage": stage, "s": round(float(stamp) - start, 3)})
    return stages, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bacteria", help="a track run directory or a bundled model's name")
    ap.add_argument("--fasta", default=str(ECOLI), help="the genome to predict")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per row (the row is their median)")
    ap.add_argument("--work", default=None, help="folder for the outputs of predict (default: a temporary one)")
    ap.add_argument("--out", default="benchmarks/results/predict_startup/latest", help="output prefix")
    args = ap.parse_args()

    py, env = sys.executable, dict(os.environ)
    fasta = str(Path(args.fasta).resolve())
    work = work_folder(args.work, "predict_startup_")
    fill = {"model": args.model, "device": args.device, "fasta": fasta, "inside": INSIDE}
    predict = [*GENOLIN, "predict", "--model", args.model, "--fasta", fasta, "--rc-average", "--device", args.device,
               "--out", str(work / "P")]
    parts = [("python -c pass", [py, "-c", "pass"]),
             ("import torch", [py, "-c", f"import time; t = time.perf_counter(); import torch; "
                                         f"print({INSIDE!r}, time.perf_counter() - t)"])]
    if args.device == "cuda":
        parts.append(("import torch + CUDA context",
                      [py, "-c", f"import time; t = time.perf_counter(); import torch; torch.zeros(1, device='cuda'); "
                                 f"torch.cuda.synchronize(); print({INSIDE!r}, time.perf_counter() - t)"]))
    parts += [("genolin --help", [py, "-m", "genolin", "--help"]),
              ("load_run (weights on the device)", [py, "-c", LOAD.format(**fill)]),
              ("genome index (TrackData.load)", [py, "-c", INDEX.format(**fill)]),
              ("load_run + genome + first batch (inside: the first batch)", [py, "-c", FIRST.format(**fill)]),
              ("genolin -q predict ... --rc-average (whole command)", predict)]
    result = {"meta": meta_of(args, fasta), "rows": [], "timeline": None}
    if result["meta"].get("default_precision") == "bfloat16":  # a CPU's default against float32
        parts.append(("the whole command with --precision float32", [*predict, "--precision", "float32"]))
    for name, cmd in parts:
        result["rows"].append(row(name, cmd, env, args.repeats))
        write(result, Path(args.out))
    stages, wall = timeline(predict, env)
    result["timeline"] = {"stages": stages, "wall_s": round(wall, 3)}
    print(write(result, Path(args.out)))
    for p in work.glob("P.*"):
        p.unlink()


def meta_of(args, fasta: str) -> dict:
    from predict_speed import run_meta

    from genolin.models import resolve_models

    run_dirs = resolve_models(args.model, args.device)  # a bundled ensemble: every member the command loads
    meta = run_meta("predict_startup", run_dirs[0], args.device)
    if args.device == "cpu":
        import torch

        from genolin.checkpoint import read_run_config, weights_for_inference
        from genolin.inference.loading import inference_bf16

        bf16 = inference_bf16(read_run_config(run_dirs[0]), torch.device("cpu"),
                              [weights_for_inference(d) for d in run_dirs])
        meta["default_precision"] = "bfloat16" if bf16 else "float32"
    meta["model"] = {"name": args.model, "run": "+".join(d.name for d in run_dirs), **meta["model"]}
    return {**meta, "device": args.device, "repeats": args.repeats, "genome": {"fasta": Path(fasta).name}}


def write(result: dict, prefix: Path) -> str:
    """PREFIX.json and PREFIX.md of what has run so far; returns the markdown."""
    meta, rows, tl = result["meta"], result["rows"], result["timeline"]
    m = meta["model"]
    precision = f" ({meta['default_precision']} by default)" if meta.get("default_precision") else ""
    lines = [*heading("genolin predict start-up", meta,
                      f"{meta['gpu'] or meta['cpu']} ({meta['cpu_count']} CPUs), Python {meta['python']}, torch "
                      f"{meta['torch']}, genolin {meta['genolin']}; device {meta['device']}{precision}; "
                      f"model {m['name']} "
                      f"({m['run']}: d_model {m['d_model']}, {m['n_layers']} layers, {m['mixer']}, k {m['k']}, stride "
                      f"{m['stride']}, window {m['window_bp']:,} bp); genome {meta['genome']['fasta']}; median of "
                      f"{meta['repeats']} fresh processes per row"),
             "| part (a fresh process each) | wall clock s | inside s | runs s |", "|---|---:|---:|---|"]
    for r in rows:
        inside = f"{r['inside_s']:.2f}" if r["inside_s"] is not None else ""
        lines.append(f"| {r['part']} | {r['wall_s']:.2f} | {inside} | {', '.join(f'{w:.2f}' for w in r['walls_s'])} |")
    if tl:
        lines += ["", f"One `genolin -q predict` with GENOLIN_TIMINGS=1 ({tl['wall_s']:.2f} s): each stage's end, "
                      "seconds from the process's start", "", "| stage | s | since the previous s |", "|---|---:|---:|"]
        before = 0.0
        for s in tl["stages"] + [{"stage": "exit (process ended)", "s": tl["wall_s"]}]:
            lines.append(f"| {s['stage']} | {s['s']:.2f} | {s['s'] - before:.2f} |")
            before = s["s"]
    write_result(prefix, result, "\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
