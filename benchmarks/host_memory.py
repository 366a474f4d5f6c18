"""Host memory of training on labelled sets of long sequences: peak RSS of `genolin train --csv` against the bases
of the set, and the bytes each further base costs.

Each set is N random sequences of --length bp (labels 0/1 alternating) written as a CSV; each run is
`genolin -q train --csv SET --max-steps STEPS --device D` (the preset's long-sequence recipe; one step by default,
or a whole run's worth; no validation set) in a process of its own, whose peak RSS the kernel reports
(wait4). The slope between two sizes is the memory a base costs; the fixed part (Python, torch, the model) cancels.
Against one step, more steps show what a run adds as it goes.

    python benchmarks/host_memory.py --sizes 150,600 --device cpu
    python benchmarks/host_memory.py --sizes 150,600,20000 --device cpu      # 20,000 x 100 kbp: 2 Gbp
    python benchmarks/host_memory.py --sizes 150,2400 --steps 1,300 --device cpu   # growth over a run

Prints a table and writes PREFIX.json and PREFIX.md (default benchmarks/results/host_memory/latest).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, heading, made_on, run_metadata, work_folder, write_result  # noqa: E402


def write_set(path: Path, n: int, length: int, seed: int = 0) -> None:
    """N random sequences of ``length`` bp as a CSV (sequence, label)."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    with open(path, "wb") as fh:
        fh.write(b"sequence,label\n")
        for i in range(n):
            fh.write(letters[rng.integers(0, 4, length, dtype=np.uint8)].tobytes() + f",{i % 2}\n".encode())


def peak_rss(cmd: list[str], log: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, seconds, exit status) of ``cmd`` run to its end."""
    t0 = time.monotonic()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss * 1024, time.monotonic() - t0, os.waitstatus_to_exitcode(status)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="150,600", help="numbers of sequences, comma-separated")
    p.add_argument("--length", type=int, default=100_000, help="bp per sequence")
    p.add_argument("--steps", default="1", help="optimizer steps of each run, comma-separated (each size runs each)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--work", default=None, help="folder for the sets and runs (default: a temporary folder)")
    p.add_argument("--out", default="benchmarks/results/host_memory/latest", help="output prefix")
    args = p.parse_args()
    work = work_folder(args.work, "host_memory_")
    rows = []
    for steps in (int(s) for s in args.steps.split(",")):
        for n in (int(s) for s in args.sizes.split(",")):
            data = work / f"set{n}.csv"
            if not data.exists():
                write_set(data, n, args.length)
            rss, seconds, status = peak_rss([*GENOLIN, "train", "--csv", str(data), "--preset", args.preset,
                                             "--max-steps", str(steps), "--device", args.device, "--out",
                                             str(work / f"run{n}_{time.time_ns()}")], work / "log.txt")
            rows.append({"sequences": n, "bases": n * args.length, "steps": steps, "peak_rss": rss,
                         "seconds": seconds, "status": status})
            print(f"{n:7d} x {args.length:,} bp, {steps} steps: peak RSS {rss / 2**20:8.0f} MiB, {seconds:6.1f} s, "
                  f"exit {status}", flush=True)
    ok = [r for r in rows if r["status"] == 0]
    for a, b in zip(ok, ok[1:], strict=False):
        if a["steps"] == b["steps"]:
            b["bytes_per_base_since_previous"] = (b["peak_rss"] - a["peak_rss"]) / (b["bases"] - a["bases"])
    meta = run_metadata("host_memory", vars(args))
    lines = [*heading("Host memory of training on long labelled sequences", meta,
                      f"{made_on(meta)}; preset {args.preset}, device {args.device}"),
             "| sequences | Mbp | steps | peak RSS (MiB) | bytes per base since the row above | seconds | exit |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        slope = r.get("bytes_per_base_since_previous")
        lines.append(f"| {r['sequences']:,} | {r['bases'] / 1e6:,.0f} | {r['steps']} | {r['peak_rss'] / 2**20:,.0f} | "
                     f"{'-' if slope is None else f'{slope:.2f}'} | {r['seconds']:.1f} | {r['status']} |")
    write_result(Path(args.out), {"meta": meta, "rows": rows}, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
