"""GUE promoter tasks: genolin trained from scratch against a bag-of-k-mers logistic regression, same splits, same run.

Tasks (../shared/data/gue, DNABERT-2's GUE; the four with a training split): prom_core_all, prom_core_notata,
prom_core_tata (70 bp), prom_300_tata (300 bp). For each task:
- baseline: counts of every k-mer for k = 1..6 (L1-normalised per k), scikit-learn LogisticRegression with C chosen
  on dev from a small grid, test MCC at 0.5;
- genolin: `genolin train --csv train --val-csv dev --preset P` (model chosen on dev MCC) for each seed, then
  `genolin evaluate --model RUN --csv test --shift-average 0` (both strands averaged for runs trained with RC
  augmentation; with ``--shift-average N`` each run is also scored with `--shift-average N`, the test-time shift
  views `genolin evaluate` uses by default for such runs with N = their max_shift_bp); mean
  and spread of test MCC over the seeds; with ``--ensemble`` also the ensemble of a row's seeds
  (`genolin evaluate --model RUN_SEED0 --model RUN_SEED1 ...`: their probabilities averaged), whose GPU minutes
  are those of its runs together (trained at once with ``--jobs``); with ``--ensemble-rows`` also the ensemble of
  every run of a task, all rows together (members of different mixers or settings: a diverse ensemble).
Prints test MCC x 100 beside published figures (issue 15's for prom_core_all; DNABERT-2's for the other three, see
PUBLISHED) and writes PREFIX.json and PREFIX.md.

    python benchmarks/gue_promoters.py --tasks prom_core_tata --preset tiny --device cpu --seeds 0,1,2
    python benchmarks/gue_promoters.py --preset base --device cuda --max-minutes 15 --out $OUT/gue_h200
    python benchmarks/gue_promoters.py --tasks prom_core_tata --mixers linear,gla,deltanet,fnet --seeds 0 ...

``--mixers``: one genolin row per mixer (``--set mixer=NAME``; empty: the preset's), the mixer column of the table;
``--variant LABEL:KEY=VALUE;KEY=VALUE``: a row with those settings. ``--jobs N`` trains N runs at once (on one GPU,
small sequence models use a fraction of it each); the k-mer regressions run meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, command, device_name, heading, versions, work_folder, write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TASKS = ("prom_core_all", "prom_core_notata", "prom_core_tata", "prom_300_tata")
PUBLISHED = {  # test MCC x 100: prom_core_all as quoted in issue 15; DNABERT-2 on the other three from the
    # DNABERT-2 paper's GUE table (Zhou et al., ICLR 2024) as recalled here, not re-checked against the paper
    "prom_core_all": {"DNABERT (3-mer)": 70.92, "NT-2500M-multi": 70.33, "DNABERT-2": 69.37},
    "prom_core_notata": {"DNABERT-2": 68.04},
    "prom_core_tata": {"DNABERT-2": 74.17},
    "prom_300_tata": {"DNABERT-2": 71.59},
}


def read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    si, li = header.index("sequence"), header.index("label")
    rows = [line.split(",") for line in lines[1:] if line]
    return [r[si] for r in rows], np.array([int(r[li]) for r in rows])


def kmer_features(seqs: list[str], ks=range(1, 7)):
    """(n, sum 4^k) float32: per k, k-mer counts divided by the number of k-mers (non-ACGT k-mers skipped)."""
    from scipy import sparse

    from genolin.tokenize import N_SPECIAL, UNK, kmer_ids

    blocks = []
    for k in ks:
        rows, cols = [], []
        for i, s in enumerate(seqs):
            ids = kmer_ids(s, k)
            ids = ids[ids != UNK] - N_SPECIAL
            rows.append(np.full(len(ids), i))
            cols.append(ids)
        r, c = np.concatenate(rows), np.concatenate(cols)
        m = sparse.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(len(seqs), 4**k))
        norm = np.asarray(m.sum(axis=1)).ravel()
        blocks.append(sparse.diags(1.0 / np.maximum(norm, 1)) @ m)
    return sparse.hstack(blocks).tocsr()


def fit_on_dev(x_train, y_train, x_dev, y_dev) -> tuple[float, float, object]:
    """(dev MCC, C, the regression) of the logistic regression whose C of a small grid scores the best dev MCC."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import matthews_corrcoef

    best = None
    for c in (0.1, 1.0, 10.0, 100.0):
        clf = LogisticRegression(C=c, max_iter=2000).fit(x_train, y_train)
        dev_mcc = matthews_corrcoef(y_dev, clf.predict(x_dev))
        if best is None or dev_mcc > best[0]:
            best = (dev_mcc, c, clf)
    return best


def kmer_baseline(task_dir: Path) -> dict:
    from sklearn.metrics import matthews_corrcoef, roc_auc_score

    t0 = time.perf_counter()
    data = {s: read_csv(task_dir / f"{s}.csv") for s in ("train", "dev", "test")}
    x = {s: kmer_features(seqs) for s, (seqs, _) in data.items()}
    dev_mcc, c, clf = fit_on_dev(x["train"], data["train"][1], x["dev"], data["dev"][1])
    p = clf.predict_proba(x["test"])[:, 1]
    y = data["test"][1]
    return {"C": c, "dev_mcc": dev_mcc, "test_mcc": matthews_corrcoef(y, p >= 0.5), "test_auroc": roc_auc_score(y, p),
            "seconds": time.perf_counter() - t0}


def genolin_run(args, task_dir: Path, seed: int, work: Path, variant: tuple[str, list[str]]) -> dict:
    """Train one run of ``variant`` (label, its --set items) and score it on test; a run already trained in
    ``work`` (best.safetensors there) is only scored."""
    label, settings = variant
    run = work / f"{task_dir.name}_{label + '_' if label != 'preset' else ''}seed{seed}"
    t0 = time.perf_counter()
    if not (run / "best.safetensors").exists():
        extra = [a for kv in [*args.set, *settings] for a in ("--set", kv)]
        if args.max_minutes:
            extra += ["--max-minutes", str(args.max_minutes)]
        subprocess.run([*GENOLIN, "train", "--csv", str(task_dir / "train.csv"), "--val-csv", str(task_dir / "dev.csv"),
                        "--preset", args.preset, "--device", args.device, "--seed", str(seed), *extra,
                        "--out", str(run)], check=True)
    train_s = time.perf_counter() - t0
    out = {"seed": seed, **score_on_test(args, task_dir, [run], run / "eval_test"), "train_seconds": round(train_s, 1),
           "run": str(run)}
    if args.shift_average:
        out["shifted"] = score_on_test(args, task_dir, [run], run / "eval_test_shift", shift=args.shift_average)
    return out


def score_on_test(args, task_dir: Path, runs: list[Path], out: Path, shift: int = 0) -> dict:
    """Test MCC and AUROC of a run, or of the ensemble of several, by ``genolin evaluate`` (``shift``: with
    ``--shift-average shift``)."""
    rc = args.rc_average
    if rc is None:  # auto: strand-averaged scoring for runs that trained with reverse complements
        rc = json.loads((runs[0] / "config.json").read_text())["train"]["rc_prob"] > 0
    models = [a for r in runs for a in ("--model", str(r))]
    subprocess.run([*GENOLIN, "evaluate", *models, "--csv", str(task_dir / "test.csv"),
                    "--rc-average" if rc else "--no-rc-average", "--shift-average", str(shift), "--device",
                    args.device, "--out", str(out)],
                   check=True)
    m = json.loads((out / "metrics.json").read_text())
    return {"test_mcc": m["mcc"], "test_auroc": m.get("auroc"), "rc_average": rc, "shift_average": shift}


def parse_variants(args) -> list[tuple[str, list[str]]]:
    """--mixers a,b and --variant LABEL:K=V;K=V -> [(label, [K=V, ...])]; none given: the preset as it is."""
    out = [(m, [f"mixer={m}"]) for m in args.mixers.split(",") if m]
    for text in args.variant:
        label, sep, body = text.partition(":")
        if not sep or not label:
            raise SystemExit(f"--variant {text!r}: expected LABEL:KEY=VALUE;KEY=VALUE")
        out.append((label, [kv for kv in body.split(";") if kv]))
    return out or [("preset", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gue", default=str(REPO.parent / "shared" / "data" / "gue"), help="the GUE folder")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-minutes", type=float, default=None, help="training time limit per run")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings for every run")
    ap.add_argument("--mixers", default="", help="comma-separated mixers, one row each (default: the preset's)")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:K=V;K=V",
                    help="a row of runs with these settings (repeatable; with --mixers: rows of both)")
    ap.add_argument("--jobs", type=int, default=1, help="runs trained at once (several share one GPU well)")
    ap.add_argument("--rc-average", action=argparse.BooleanOptionalAction, default=None,
                    help="score test with forward and reverse-complement predictions averaged (default: for runs "
                         "trained with reverse complements, rc_prob > 0)")
    ap.add_argument("--shift-average", type=int, default=0, metavar="N",
                    help="also score every run and ensemble with `genolin evaluate --shift-average N`")
    ap.add_argument("--ensemble", action="store_true", help="also score the ensemble of each row's seeds")
    ap.add_argument("--ensemble-rows", action="store_true",
                    help="also score the ensemble of every run of a task, all rows (mixers, variants) together")
    ap.add_argument("--no-genolin", dest="genolin", action="store_false", help="the baseline only")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary folder)")
    ap.add_argument("--out", default="benchmarks/results/gue_promoters/latest", help="output prefix")
    args = ap.parse_args()

    work = work_folder(args.work, "gue_")
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = parse_variants(args)
    tasks = args.tasks.split(",")
    for task in tasks:
        if not (Path(args.gue) / task / "train.csv").exists():
            raise SystemExit(f"{Path(args.gue) / task / 'train.csv'}: not found (give --gue, the GUE folder)")
    pool = ThreadPoolExecutor(max(1, args.jobs))  # each job is a subprocess: threads only wait
    futures = {(t, v[0], s): pool.submit(genolin_run, args, Path(args.gue) / t, s, work, v)
               for t in tasks for v in variants for s in seeds} if args.genolin else {}
    meta = {**versions("gue_promoters"), "device": device_name(args.device), "cpu_count": os.cpu_count(),
            "command": command("gue_promoters"), "args": vars(args)}
    rows, ensembles = [], {}
    for task in tasks:  # the regressions run here while the pool trains
        baseline = kmer_baseline(Path(args.gue) / task)
        print(f"{task:17s} k-mer LR test MCC x100 {100 * baseline['test_mcc']:6.2f}", flush=True)
        rows += [{"task": task, "mixer": label, "settings": settings, "baseline": baseline, "genolin": []}
                 for label, settings in variants]
    for row in rows:
        for seed in seeds if args.genolin else ():
            r = futures[(row["task"], row["mixer"], seed)].result()
            row["genolin"].append(r)
            print(f"{row['task']:17s} {row['mixer']:15s} seed {seed} test MCC x100 {100 * r['test_mcc']:6.2f} "
                  + (f"(shift views: {100 * r['shifted']['test_mcc']:6.2f}) " if "shifted" in r else "")
                  + f"({r['train_seconds']:.0f} s)", flush=True)
        if args.ensemble and len(row["genolin"]) > 1:
            runs = [Path(g["run"]) for g in row["genolin"]]
            name = runs[0].name.rsplit("_seed", 1)[0]
            row["ensemble"], row["ensemble_shifted"] = score_ensemble(args, row["task"], runs,
                                                                      runs[0].with_name(name + "_ensemble"))
            print(f"{row['task']:17s} {row['mixer']:15s} ensemble of {len(runs)} seeds test MCC x100 "
                  f"{ensemble_text(row['ensemble'], row['ensemble_shifted'])}", flush=True)
        write_tables(args, meta, rows, ensembles)
    for task in tasks if args.ensemble_rows and args.genolin and len(variants) > 1 else ():
        runs = [Path(g["run"]) for r in rows if r["task"] == task for g in r["genolin"]]
        plain, shifted = score_ensemble(args, task, runs, work / f"{task}_rows_ensemble")
        ensembles[task] = {"members": [r.name for r in runs], "ensemble": plain, "ensemble_shifted": shifted}
        print(f"{task:17s} ensemble of all {len(runs)} runs (every row) test MCC x100 {ensemble_text(plain, shifted)}",
              flush=True)
        write_tables(args, meta, rows, ensembles)
    pool.shutdown()
    print(Path(f"{args.out}.md").read_text())


def score_ensemble(args, task: str, runs: list[Path], out: Path) -> tuple[dict, dict | None]:
    """The ensemble of ``runs`` on ``task``'s test split, plain and (with --shift-average) with the shift views."""
    plain = score_on_test(args, Path(args.gue) / task, runs, out)
    shifted = (score_on_test(args, Path(args.gue) / task, runs, out.with_name(out.name + "_shift"),
                             shift=args.shift_average) if args.shift_average else None)
    return plain, shifted


def ensemble_text(plain: dict, shifted: dict | None) -> str:
    return f"{100 * plain['test_mcc']:6.2f}" + (f" (shift views: {100 * shifted['test_mcc']:6.2f})" if shifted else "")


def write_tables(args, meta: dict, rows: list[dict], ensembles: dict) -> None:
    """PREFIX.json and PREFIX.md of what is scored so far (written after every row: a call cut short keeps them)."""
    names = sorted({n for t in PUBLISHED.values() for n in t})
    lines = [*heading("GUE promoter tasks, test MCC x 100", meta,
                      f"{meta['device']} ({meta['cpu_count']} CPUs), torch {meta['torch']}, genolin {meta['genolin']}; "
                      f"preset {args.preset}, seeds {args.seeds}"
                      + (f", {args.max_minutes} min per run" if args.max_minutes else "")),
             "| task | mixer | genolin (mean +- sd over seeds) | ensemble of the seeds | k-mer LR (C on dev) "
             "| genolin - LR | train s per seed | " + " | ".join(f"{n} (published)" for n in names) + " |"
             + (f" with --shift-average {args.shift_average} | its ensemble |" if args.shift_average else ""),
             "|---|---|---:|---:|---:|---:|---:|" + "---:|" * (len(names) + (2 if args.shift_average else 0))]
    for r in rows:
        lr = 100 * r["baseline"]["test_mcc"]
        mccs = [100 * g["test_mcc"] for g in r["genolin"]]
        if mccs:
            sd = statistics.stdev(mccs) if len(mccs) > 1 else 0.0
            ours = f"{statistics.mean(mccs):.2f} +- {sd:.2f}"
            diff = f"{statistics.mean(mccs) - lr:+.2f}"
            secs = f"{statistics.mean(g['train_seconds'] for g in r['genolin']):.0f}"
        else:
            ours = diff = secs = ""
        pub = [str(PUBLISHED.get(r["task"], {}).get(n, "")) for n in names]
        ens = f"{100 * r['ensemble']['test_mcc']:.2f}" if "ensemble" in r else ""
        shifted = ""
        if args.shift_average:
            sh = [100 * g["shifted"]["test_mcc"] for g in r["genolin"]]
            shifted = (f" {statistics.mean(sh):.2f} +- {statistics.stdev(sh) if len(sh) > 1 else 0.0:.2f} |" if sh
                       else " |") + (f" {100 * r['ensemble_shifted']['test_mcc']:.2f} |" if "ensemble_shifted" in r
                                     else " |")
        lines.append(f"| {r['task']} | {r['mixer']} | {ours} | {ens} | {lr:.2f} | {diff} | {secs} | "
                     + " | ".join(pub) + " |" + shifted)
    for task, e in ensembles.items():
        lines.append(f"\n{task}: ensemble of all {len(e['members'])} runs (every row) test MCC x100 "
                     + ensemble_text(e["ensemble"], e["ensemble_shifted"]).strip())
    write_result(str(Path(args.out)), {"meta": meta, "rows": rows, "ensembles_of_rows": ensembles},
                 "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
