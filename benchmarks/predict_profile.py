"""Where genome prediction spends its time: each stage of ``Predictor.region_probs`` timed alone, then together.

Stages, each over the whole (tiled) genome, in this process, after the model is loaded:
- plan + tokens: cutting windows and tokenizing them (``GenomeWindows.tokens``; runs on a background thread);
- model: the encoder forward and probabilities of every batch (inputs already tokenized; on CUDA synchronized);
- pieces: turning each batch's probabilities into pieces (centre cut, RC average, all-N bins);
- writes: the track writer (bedGraph or bigWig) fed the pieces;
- pipeline: ``region_probs`` end to end (the stages overlap there), and pipeline + writes.
The sum of the stages against the pipeline says how much overlap there is; the largest stage bounds the speed.
Then torch.profiler over a few model batches lists the ops that dominate the forward.

    python benchmarks/predict_profile.py --model RUN --device cpu --out benchmarks/results/predict_profile/cpu
    python benchmarks/predict_profile.py --preset base --device cuda --mbp 20 --out $OUT/predict_profile_h200

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import profile_table, timed, write_result  # noqa: E402
from predict_speed import ECOLI, prepare, run_meta  # noqa: E402

from genolin.inference import load_run  # noqa: E402
from genolin.tasks.track import TrackData  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a track run directory (default: a --preset run trained one step)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--fasta", default=str(ECOLI))
    ap.add_argument("--mbp", type=float, default=None, help="tile the genome to at least this many Mbp")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--rc-average", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--format", default="bedgraph", choices=["bedgraph", "bigwig"])
    ap.add_argument("--profile-batches", type=int, default=3, help="model batches under torch.profiler")
    ap.add_argument("--compile", action="store_true", help="the blocks through torch.compile (predict --compile)")
    ap.add_argument("--window-bp", type=int, default=None, help="predict --window-bp (default: the training window)")
    ap.add_argument("--bf16-weights", action=argparse.BooleanOptionalAction, default=None,
                    help="load_run's bf16_weights (default: its own choice, inference_bf16: track runs on CUDA, "
                         "and on a CPU with bfloat16 units those whose weights are stored in bfloat16)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="benchmarks/results/predict_profile/latest")
    args = ap.parse_args()

    work, run_dir, fasta, bp = prepare(args, "predict_profile_")
    run = load_run(run_dir, args.device, compile=args.compile, window_bp=args.window_bp,
                   bf16_weights=args.bf16_weights)
    pred, dev, rc = run.predictor, run.predictor.device, args.rc_average
    windows = pred.windows  # the genome-window stages, one at a time
    data = TrackData.load([str(fasta)], [], run.config.train)
    regions = data.whole()

    # warm-up: one batch through every stage (kernel compilation, allocator)
    plan = list(windows.plan(data, regions))
    first = windows.tokens(data, plan[0], rc)
    windows.window_probs(first[2], first[3], rc)

    t_tokens, batches = timed(lambda: [windows.tokens(data, p, rc) for p in windows.plan(data, regions)], dev)
    outs = []

    def model_all():
        for _, _, codes, nbins in batches:
            outs.append(windows.window_probs(codes, nbins, rc).cpu().numpy())

    t_model, _ = timed(model_all, dev)
    tokens = sum(int(b[3].sum()) * (2 if rc else 1) for b in batches)

    class Bar:
        def update(self, n):
            pass

    def pieces_all():
        return [p for (pending, bases, *_), host in zip(batches, outs, strict=True)
                for p in windows.pieces(data, pending, bases, (host, None), Bar())]

    t_pieces, pieces = timed(pieces_all, dev)
    batches = outs = None  # free them before the pipeline runs

    from genolin.config import DataSpec
    from genolin.predict import PredictOptions, predict

    class Replay:  # the predictor's interface to TrackTask.predict, yielding pieces already computed
        writes, dist = True, pred.dist

        def __init__(self, items):
            self.items = items

        def region_probs(self, *a, **k):
            return iter(self.items)

    spec = DataSpec("track", fasta=[str(fasta)])
    opts = PredictOptions(rc_average=rc, track_format=args.format, progress=False)
    t_write, _ = timed(lambda: run.task.predict(Replay(pieces), spec, work / "replay", opts), dev)
    pieces = None
    t_pipe, _ = timed(lambda: sum(len(p) for _, _, p in pred.region_probs(data, regions, rc_average=rc,
                                                                           progress=False)), dev)
    t_pipe_write, _ = timed(lambda: predict(run, spec, work / "full", opts), dev)

    few = [windows.tokens(data, p, rc) for p in plan[: args.profile_batches]]  # the forward under the profiler
    table = profile_table(lambda: [windows.window_probs(codes, nbins, rc).cpu() for _, _, codes, nbins in few], dev,
                          18, 48)

    stages = {"plan + tokens": t_tokens, "model": t_model, "pieces": t_pieces,
              f"writes + peaks ({args.format})": t_write,
              "pipeline (region_probs)": t_pipe, f"predict() ({args.format})": t_pipe_write}
    meta = run_meta("predict_profile", run_dir, args.device, torch_threads=torch.get_num_threads())
    meta["model"].update(amp=pred.amp, compiled=pred.compiled, inference_window_bp=pred.window_bp,
                         weights=str(next(run.model.parameters()).dtype))
    meta.update(genome={"fasta": Path(args.fasta).name, "bp": bp, "tiled_mbp": args.mbp}, rc_average=rc,
                batch_windows=pred.batch_size, batches=len(plan), tokens=tokens)
    rows = [{"stage": k, "s": round(v, 3), "mbp_s": bp / v / 1e6, "tokens_s": tokens / v} for k, v in stages.items()]
    for r in rows:
        print(f"{r['stage']:34s} {r['s']:8.2f} s  {r['mbp_s']:7.2f} Mbp/s  {r['tokens_s'] / 1e6:7.2f} M tokens/s")
    print(table)
    m = meta["model"]
    lines = [f"# genolin predict profile ({meta['date']})", "",
             f"{meta['gpu'] or meta['cpu']} ({meta['cpu_count']} CPUs, {meta['torch_threads']} torch threads), "
             f"torch {meta['torch']}, genolin {meta['genolin']}; model d_model {m['d_model']}, {m['n_layers']} "
             f"layers, {m['mixer']}, k {m['k']}, stride {m['stride']}, trained on {m['window_bp']:,} bp windows, "
             f"predicting in {m['inference_window_bp'] or m['window_bp']:,} bp windows, {m['weights']} weights, bf16 "
             f"autocast {'on' if m['amp'] else 'off'}, {'compiled' if m['compiled'] else 'eager'}; genome "
             f"{bp / 1e6:.2f} Mbp, RC average {'on' if rc else 'off'}, "
             f"{len(plan)} batches of {pred.batch_size} windows, {tokens:,} tokens", "", f"`{meta['command']}`", "",
             "| stage | s | Mbp/s | M tokens/s |", "|---|---:|---:|---:|"]
    lines += [f"| {r['stage']} | {r['s']:.2f} | {r['mbp_s']:.2f} | {r['tokens_s'] / 1e6:.2f} |" for r in rows]
    lines += ["", f"torch.profiler over the forward of {len(few)} batches:", "", "```", table, "```"]
    write_result(Path(args.out), {"meta": meta, "stages": rows, "profile": table}, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
