"""Many genomes with the bundled model: one `genolin predict --out-dir` command against one command per genome.

    python benchmarks/many_genomes.py --device cpu --copies 1 --out benchmarks/results/many_genomes/cpu
    python benchmarks/many_genomes.py --device cuda --copies 10 --out benchmarks/results/many_genomes/h100

The genomes are the ten READY genomes of ../shared (genolin/models/build.py), each linked --copies times under a new
name (the issue's "the shared genomes repeated under new names"). Both ways write the same files (bedGraph tracks,
calls, GFF3); the table gives each one's wall time as a whole command (or commands), its genomes per minute and the
ratio. The per-genome work is the same both ways: what one command saves is each further command's start-up
(interpreter, imports, the model's load), so the ratio is bounded by (start-up + work) / work per genome.
``--separate N`` runs only the first N genomes as commands of their own (per genome figures then compare). The model's
speed is the separate commands' bases over their summed seconds after the model was loaded (genolin's own log line);
the one command's wall time is also given over its bases at that speed (the issue's target on a GPU: within 2x).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_metadata, write_result  # noqa: E402

from genolin.models.build import GENOMES, READY  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def genomes(shared: Path, work: Path, copies: int) -> list[Path]:
    """Links to the READY genomes' FASTAs (and their indexes), ``copies`` of each under new names."""
    work.mkdir(parents=True, exist_ok=True)
    out = []
    for c in range(copies):
        for g in READY:
            fasta = shared / GENOMES[g][0][0]
            if not fasta.exists():
                sys.exit(f"many_genomes: missing {fasta} (the shared data folder: --shared)")
            link = work / f"{g}_{c}.fasta.gz"
            for suffix in ("", ".fai", ".gzi"):
                src, dst = Path(f"{fasta}{suffix}"), Path(f"{link}{suffix}")
                if src.exists() and not dst.exists():
                    dst.symlink_to(src.resolve())
            out.append(link)
    return out


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds of the command, its seconds after the model was loaded: genolin's -v log line)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"many_genomes: {' '.join(cmd[:8])} ... failed:\n{proc.stderr[-2000:]}")
    seconds = time.perf_counter() - t0
    found = re.findall(r"([0-9.]+) s after the model was loaded", proc.stderr + proc.stdout)
    if not found:
        sys.exit(f"many_genomes: {' '.join(cmd[:8])} ... logged no time after the model's load")
    return seconds, float(found[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--copies", type=int, default=1, help="each READY genome this many times (10 -> 100 genomes)")
    p.add_argument("--model", default="bacteria")
    p.add_argument("--device", default="cpu")
    p.add_argument("--work", default="/tmp/many_genomes")
    p.add_argument("--separate", type=int, default=None,
                   help="run only the first N genomes as commands of their own (default: every genome)")
    p.add_argument("--out", default="benchmarks/results/many_genomes/latest", help="output prefix")
    args = p.parse_args()
    work = Path(args.work)
    fastas = genomes(Path(args.shared), work / "genomes", args.copies)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    base = [sys.executable, "-m", "genolin", "-v", "predict", "--model", args.model, "--rc-average", "--device",
            args.device]
    one, one_loaded = timed([*base, *[a for f in fastas for a in ("--fasta", str(f))], "--out-dir",
                             str(work / "one")], env)
    (work / "each").mkdir(exist_ok=True)
    alone = fastas if args.separate is None else fastas[:args.separate]
    if not alone:
        sys.exit("many_genomes: --separate needs at least one genome")
    runs = [timed([*base, "--fasta", str(f), "--out", str(work / "each" / f.name.split(".")[0])], env) for f in alone]
    each, each_loaded = sum(r[0] for r in runs), sum(r[1] for r in runs)
    same = all((work / "one" / f"{f.name.split('.')[0]}.peaks.bed").read_text().splitlines()[1:]
               == (work / "each" / f"{f.name.split('.')[0]}.peaks.bed").read_text().splitlines()[1:] for f in alone)
    summary = [line.split("\t") for line in (work / "one" / "summary.tsv").read_text().splitlines()[1:]]
    bp = sum(int(r[3]) for r in summary)
    alone_bp = sum(int(r[3]) for r in summary[:len(alone)])
    speed = alone_bp / each_loaded  # the model's bp per second after its load, a genome a command
    meta = run_metadata("many_genomes", vars(args))
    rows = [{"way": "one command (--out-dir)", "genomes": len(fastas), "seconds": one, "after_load": one_loaded},
            {"way": "a command per genome", "genomes": len(alone), "seconds": each, "after_load": each_loaded}]
    lines = [f"# Many genomes in one command ({meta['date']})", "", f"{meta.get('gpu') or meta['cpu']}, torch "
             f"{meta['torch']}, genolin {meta['genolin']}; {len(fastas)} genomes, {bp / 1e6:.1f} Mbp, "
             f"`--model {args.model} --rc-average --device {args.device}`", "", f"`{meta['command']}`", "",
             "| way | genomes | seconds (whole commands) | seconds after the model's load | genomes per minute |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['way']} | {r['genomes']} | {r['seconds']:.1f} | {r['after_load']:.1f} | "
              f"{60 * r['genomes'] / r['seconds']:.1f} |" for r in rows]
    ratio = (each / len(alone)) / (one / len(fastas))
    lines += ["", f"Per genome one command is {ratio:.2f}x faster; the calls of the two ways are "
              f"{'the same' if same else 'NOT the same'}. The model's speed after its load (a genome a command): "
              f"{speed / 1e6:.2f} Mbp/s; the one command's whole time is {one / (bp / speed):.2f}x the time of its "
              f"bases at that speed."]
    text = "\n".join(lines) + "\n"
    write_result(args.out, {"meta": meta, "genomes": len(fastas), "bp": bp, "rows": rows, "ratio": ratio,
                            "model_bp_per_s": speed, "one_over_bases_at_speed": one / (bp / speed),
                            "same_calls": same}, text)
    print(text)


if __name__ == "__main__":
    main()
