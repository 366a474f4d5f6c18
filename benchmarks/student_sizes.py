"""Which CPU-student sizes fit the CPU time budget (issue 67: E. coli within 60 s as a whole command on 2 cores):
each size as a track run of random weights, stored in bfloat16 as the bundled members are, its whole
`genolin -q predict --model RUN --fasta G --rc-average --device cpu` timed in fresh processes. The weights' values do
not change the work; the rest of each run's settings (tokens, window, head) are the bundled CPU student's.

    python benchmarks/student_sizes.py --out benchmarks/results/student_sizes/cpu

--size NAME=D_MODELxLAYERS[xHEADS]:MIXER (repeat; default: the shipped 96x4 linear and the candidates around it).
Writes PREFIX.json (settings, machine, versions, date, rows) and PREFIX.md (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, heading, run_child, run_metadata, work_folder, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ECOLI = ROOT / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz"
SIZES = ["L96=96x4:linear", "H96=96x4:hybrid", "L96x6=96x6:linear", "L128=128x4:linear", "L160=160x4:linear",
         "L128x6=128x6:linear"]


def parse_size(text: str) -> tuple[str, dict]:
    """"NAME=96x4[x4]:mixer" -> (NAME, model settings); exits naming a malformed one."""
    name, _, rest = text.partition("=")
    shape, _, mixer = rest.partition(":")
    try:
        dims = [int(x) for x in shape.split("x")]
        d, layers = dims[:2]
        heads = dims[2] if len(dims) > 2 else 4  # the bundled student's
    except ValueError:
        sys.exit(f"student_sizes: --size {text!r}: expected NAME=D_MODELxLAYERS[xHEADS]:MIXER")
    if not name or not mixer or len(dims) > 3:
        sys.exit(f"student_sizes: --size {text!r}: expected NAME=D_MODELxLAYERS[xHEADS]:MIXER")
    return name, {"d_model": d, "n_layers": layers, "n_heads": heads, "mixer": mixer}


def random_run(folder: Path, base: Path, model: dict) -> int:
    """A run directory in ``folder``: ``base``'s config with ``model``'s settings, random weights in bfloat16;
    returns the parameter count."""
    import torch

    from genolin.checkpoint import save_weights
    from genolin.model import Encoder, EncoderConfig

    config = json.loads((base / "config.json").read_text())
    config["train"]["model"].update(model)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    encoder = Encoder(EncoderConfig(**config["train"]["model"]))
    save_weights(folder / "best.safetensors", {k: v.to(torch.bfloat16) for k, v in encoder.state_dict().items()},
                 {"step": "1"})
    return sum(p.numel() for p in encoder.parameters())


def table_row(r: dict) -> str:
    return (f"| {r['name']} | {r['d_model']} x {r['n_layers']} | {r['mixer']} | {r['parameters'] / 1e6:.2f} | "
            f"{r['wall_s']:.1f} | {', '.join(map(str, r['walls_s']))} | {r['peak_mib']} | "
            f"{'yes' if r['fits'] else 'no'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", action="append", default=None, help="NAME=D_MODELxLAYERS[xHEADS]:MIXER (repeat)")
    ap.add_argument("--fasta", default=str(ECOLI), help="the genome to predict")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per size (the row is their median)")
    ap.add_argument("--budget-s", type=float, default=60.0, help="the whole command's time budget")
    ap.add_argument("--work", default=None, help="folder for the runs and outputs (default: a temporary one)")
    ap.add_argument("--out", default="benchmarks/results/student_sizes/latest", help="output prefix")
    args = ap.parse_args()
    from genolin.models import resolve_model

    base = resolve_model("bacteria", "cpu")
    work = work_folder(args.work, "student_sizes_")
    import torch

    from genolin.bench import cpu_name
    from genolin.device import cpu_bf16

    meta = {**run_metadata("student_sizes", vars(args)), "cpu": cpu_name(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "precision": "bfloat16" if cpu_bf16() else "float32"}
    rows = []
    for name, model in map(parse_size, args.size or SIZES):
        params = random_run(work / name, base, model)
        cmd = [*GENOLIN, "predict", "--model", str(work / name), "--fasta", args.fasta, "--rc-average",
               "--device", "cpu", "--out", str(work / "P")]
        runs = [run_child(cmd, None, ROOT)[::3] for _ in range(args.repeats)]  # (wall s, peak MiB)
        wall = statistics.median(r[0] for r in runs)
        rows.append({"name": name, **model, "parameters": params, "wall_s": round(wall, 2),
                     "walls_s": [round(r[0], 2) for r in runs], "peak_mib": round(max(r[1] for r in runs)),
                     "fits": wall <= args.budget_s})
        print(f"{name:10s} {params / 1e6:5.2f} M parameters  {wall:6.1f} s", flush=True)
    about = (f"{meta['cpu']} ({meta['cpu_count']} CPUs), torch {meta['torch']}, genolin {meta['genolin']}; random "
             f"weights stored in bfloat16, run in {meta['precision']} (the default on this CPU; the bundled student's "
             f"settings otherwise); genome {Path(args.fasta).name}; median of {args.repeats} fresh process(es) per "
             "size")
    text = "\n".join([*heading("CPU student sizes against the time budget", meta, about),
                      "| size | d_model x layers | mixer | parameters (M) | whole command s | runs s | peak MiB | "
                      f"within {args.budget_s:.0f} s |", "|---|---|---|---:|---:|---|---:|---|",
                      *map(table_row, rows)]) + "\n"
    write_result(args.out, {"meta": meta, "rows": rows}, text)
    print(text)


if __name__ == "__main__":
    main()
