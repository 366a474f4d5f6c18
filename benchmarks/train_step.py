"""One training step of the encoder (forward, backward, AdamW) at long N: time and peak memory per recompute mode.

Modes: "none" (every activation kept), "mlp" (`checkpoint_mlp`: each block's norm + MLP recomputed in backward),
"block" (`checkpointing`: whole blocks recomputed), "both" (nested: inside a block's recompute each half recomputed
again on its own). --compile:
the blocks through torch.compile (Encoder.compile_blocks). Base encoder by default (6 layers, d_model 256, 8 heads,
hybrid mixer, track head), batch 1, bf16 autocast on CUDA (float32 on a CPU), attention backend "auto" (Triton on
CUDA) and the PyTorch reference (GENOLIN_ATTENTION_BACKEND=reference) in the same run for the ratio. Peak memory:
torch.cuda.max_memory_allocated on CUDA; on a CPU the bytes autograd keeps for backward (saved-tensor hooks),
the part that recompute changes. Each point: --warmup untimed steps, then the median of --repeats.

    python benchmarks/train_step.py --device cuda --n 100000 1000000 --out benchmarks/results/train_step/h200_eager
    python benchmarks/train_step.py --device cpu --n 8192 32768 --out benchmarks/results/train_step/cpu

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import device_name, median_time, versions, write_result  # noqa: E402

from genolin.model import Encoder, EncoderConfig  # noqa: E402


def step_fn(model: Encoder, opt: torch.optim.Optimizer, ids: torch.Tensor, amp: bool):
    def step():
        torch.compiler.cudagraph_mark_step_begin()  # a new iteration for CUDA graphs (compile mode reduce-overhead)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out = model(ids)
            loss = out.track.float().square().mean()
        del out  # the final norm's output (N x d float32) is not needed by backward: free it before
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def kept_bytes(fn) -> int:
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total[0]


def peak_report(step, top: int = 25) -> list[str]:
    """What is allocated at the peak of one step (CUDA): the step runs under torch's memory history; its events
    are replayed to the highest total, and the allocations live then are listed, largest first, each with the
    frames of genolin, the benchmark or inductor's generated code that made it."""
    before = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    step()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for trace in snapshot["device_traces"] for e in trace if e["action"] in ("alloc", "free_completed")]
    total, peak, peak_at = 0, 0, -1
    for i, e in enumerate(events):
        total += e["size"] if e["action"] == "alloc" else -e["size"]
        if total > peak:
            peak, peak_at = total, i
    live: dict[int, dict] = {}
    for e in events[: peak_at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        else:
            live.pop(e["addr"], None)

    def where(e) -> str:
        keep = [f"{Path(f['filename']).name}:{f['line']} {f['name']}" for f in e.get("frames", [])
                if any(s in f["filename"] for s in ("genolin", "torchinductor", "train_step"))]
        return " < ".join(keep[:3]) or "(no genolin frame)"

    lines = [f"allocated before the step: {before / 2**20:,.1f} MiB; peak within it: +{peak / 2**20:,.1f} MiB "
             f"(total {(before + peak) / 2**30:.3f} GiB), {len(live)} allocations live then; largest:"]
    for e in sorted(live.values(), key=lambda e: -e["size"])[:top]:
        lines.append(f"  {e['size'] / 2**20:9.1f} MiB  {where(e)}")
    return lines


def measure(args, n: int, mode: str, backend: str) -> dict:
    if backend == "reference":
        os.environ["GENOLIN_ATTENTION_BACKEND"] = "reference"
    else:
        os.environ.pop("GENOLIN_ATTENTION_BACKEND", None)
    dev = torch.device(args.device)
    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, mixer=args.mixer,
                        n_classes=0, track_channels=2, checkpointing=mode in ("block", "both"),
                        checkpoint_mlp=mode in ("mlp", "both"),
                        chunk_tokens=args.chunk)
    model = Encoder(cfg).to(dev).train()
    if args.compile:
        model.compile_blocks(**({"mode": args.compile_mode} if args.compile_mode else {}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    ids = torch.randint(5, cfg.vocab_size, (1, n), device=dev)
    amp = dev.type == "cuda"
    step = step_fn(model, opt, ids, amp)
    row = {"n": n, "mode": mode, "backend": backend, "compiled": args.compile}
    try:
        for _ in range(args.warmup):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        row["ms"] = median_time(step, args.repeats, dev)[0] * 1e3
        if dev.type == "cuda":
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
            if args.peak_report:
                row["peak_report"] = peak_report(step)
                print("\n".join(row["peak_report"]), flush=True)
        else:
            row["kept_gib"] = kept_bytes(lambda m=model: m(ids).track) / 2**30
    except torch.OutOfMemoryError:
        row["error"] = "out of memory"
    del model, opt
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000], help="tokens per step (batch 1)")
    ap.add_argument("--modes", default="none,mlp,block", help="recompute modes")
    ap.add_argument("--reference", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the PyTorch reference attention")
    ap.add_argument("--mixer", default="hybrid")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=16384, help="chunk_tokens of the attention op")
    ap.add_argument("--compile", action="store_true", help="torch.compile the blocks (Encoder.compile_blocks)")
    ap.add_argument("--compile-mode", default=None, help="with --compile: torch.compile's mode (e.g. reduce-overhead)")
    ap.add_argument("--memory-budget", type=float, default=None,
                    help="with --compile: torch._functorch.config.activation_memory_budget (1: keep what the "
                         "partitioner keeps by default; lower: recompute more inside compiled graphs)")
    ap.add_argument("--peak-report", action="store_true",
                    help="CUDA: after timing, list what is allocated at the peak of one more step")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/train_step/latest", help="output prefix")
    args = ap.parse_args()

    if args.memory_budget is not None:
        import torch._functorch.config as functorch_config

        functorch_config.activation_memory_budget = args.memory_budget
    rows = []
    backends = ["auto"] + (["reference"] if args.reference else [])
    for n in args.n:
        for backend in backends:
            for mode in args.modes.split(","):
                row = measure(args, n, mode, backend)
                rows.append(row)
                mem = row.get("peak_gib", row.get("kept_gib"))
                blocks = "compiled" if args.compile else "eager"
                print(f"N {n:>9,}  {backend:9s} {mode:5s} {blocks:8s}  " + (row.get("error") or
                      f"{row['ms']:9.1f} ms  {mem:7.2f} GiB"), flush=True)
    meta = {**versions("train_step"), "device": device_name(args.device), "cpu_count": os.cpu_count(),
            "args": vars(args), "memory": "torch.cuda.max_memory_allocated" if args.device == "cuda" else
                                          "bytes autograd keeps for backward (saved-tensor hooks)"}
    mem_name = "peak GiB" if args.device == "cuda" else "kept for backward, GiB"
    lines = [f"# Encoder training step ({meta['date']})", "",
             f"{meta['device']}, torch {meta['torch']}, genolin {meta['genolin']}; d_model {args.d_model}, "
             f"{args.layers} layers, {args.heads} heads, {args.mixer}, batch 1, "
             f"{'bf16 autocast' if args.device == 'cuda' else 'float32'}, AdamW; median of {args.repeats} steps", "",
             "`python benchmarks/train_step.py " + " ".join(sys.argv[1:]) + "`", "",
             "| N | attention | recompute | blocks | step ms | " + mem_name + " |", "|---:|---|---|---|---:|---:|"]
    for r in rows:
        mem = r.get("peak_gib", r.get("kept_gib"))
        cells = (r["error"], "") if "error" in r else (f"{r['ms']:.1f}", f"{mem:.2f}")
        blocks = "compiled" if r.get("compiled") else "eager"
        lines.append(f"| {r['n']:,} | {r['backend']} | {r['mode']} | {blocks} | {cells[0]} | {cells[1]} |")
    write_result(Path(args.out), {"meta": meta, "rows": rows}, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
