"""The encoder's inference forward on one batch of genome windows: what each part of the base track model costs.

Genome prediction runs batches of windows (base track model: 8,192 bp windows at stride 2 = 4,096 tokens, 64 of
them per batch on CUDA, 128 rows with RC averaging) through the encoder with gradients off. This times that forward
(ids (B, N) -> track (B, N, 2), bf16 autocast on CUDA) for variants of the model that differ in one part each, so
the table says what the mixer, its local softmax, the convolution, compilation and so on cost per batch; then
torch.profiler's table of the kernels of the first variant (or of each with --profile-all).

Variants are "NAME:key=value;key=value" over EncoderConfig fields (e.g. "linear:mixer=linear",
"w64:local_window_tokens=64", "conv1:conv_kernel=1") and "compile", "bf16" (weights in bfloat16), "norm_conv" and
"fused" ("reference": without those inference kernels, genolin.ops.norm_conv and genolin.ops.fused) and "mode"
(torch.compile's) and "inductor.NAME" (an inductor option) as keys ("compiled:compile=1",
"autotuned:compile=1;mode=max-autotune-no-cudagraphs;inductor.max_autotune_gemm_backends=TRITON").

    python benchmarks/encoder_forward.py --device cuda --batch 64 --out $OUT/encoder_forward_h200 \
        --variant "compiled:compile=1" --variant "linear:mixer=linear"

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import command, heading, made_on, profile_table, timed, versions, write_result  # noqa: E402

from genolin.bench import cpu_name  # noqa: E402
from genolin.model import Encoder, EncoderConfig  # noqa: E402

BASE = dict(vocab_size=4101, d_model=256, n_layers=6, n_heads=8, mixer="hybrid", track_channels=2, dropout=0.0)


def parse_variant(text: str) -> tuple[str, dict]:
    """"NAME:key=value;key=value" -> (NAME, {key: value}) with values as ints, floats or strings."""
    name, _, body = text.partition(":")
    values = {}
    for item in filter(None, body.split(";")):
        key, _, raw = item.partition("=")
        for cast in (int, float):
            try:
                values[key] = cast(raw)
                break
            except ValueError:
                continue
        else:
            values[key] = raw
    return name, values


def build(values: dict, device: torch.device) -> Encoder:
    values = dict(values)
    compile_ = bool(values.pop("compile", 0))
    half = bool(values.pop("bf16", 0))
    mode = values.pop("mode", None)  # torch.compile's mode, e.g. max-autotune-no-cudagraphs (matmul templates
    #                                  with the elementwise work after them fused in)
    values.pop("norm_conv", None)  # (main sets the environment)
    values.pop("fused", None)
    # "inductor.NAME=VALUE": torch._inductor.config options, e.g. inductor.max_autotune_gemm_backends=TRITON
    # (matmuls as Triton templates, which take the elementwise work after them into their epilogues)
    inductor = {k.removeprefix("inductor."): values.pop(k) for k in list(values) if k.startswith("inductor.")}
    fields = {f.name for f in dataclasses.fields(EncoderConfig)}
    unknown = set(values) - fields
    if unknown:
        sys.exit(f"unknown EncoderConfig field(s): {', '.join(sorted(unknown))}")
    model = Encoder(EncoderConfig(**{**BASE, **values})).to(device).eval()
    if half:  # weights and activations in bfloat16 (the residual stream too), not autocast's float32 stream
        model = model.to(torch.bfloat16)
    if compile_:
        torch.compiler.reset()  # the blocks' code is shared: no graph traced for an earlier variant is reused
        model.compile_blocks(**({"mode": mode} if mode else {}), **({"options": inductor} if inductor else {}))
    return model


def forward_fn(model: Encoder, ids: torch.Tensor, amp: bool):
    def forward():
        with torch.no_grad(), torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=amp):
            return torch.sigmoid(model(ids, padding=False).track.float())
    return forward


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=64, help="windows per batch (RC averaging doubles it)")
    ap.add_argument("--tokens", type=int, default=4096, help="tokens per window")
    ap.add_argument("--variant", action="append", default=[], help="NAME:key=value;... (repeatable)")
    ap.add_argument("--no-plain", action="store_true", help="leave out the plain base model")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--profile-rows", type=int, default=25)
    ap.add_argument("--profile-all", action="store_true", help="a profiler table for every variant")
    ap.add_argument("--out", default="benchmarks/results/encoder_forward/latest")
    args = ap.parse_args()

    dev = torch.device(args.device)
    amp = dev.type == "cuda"
    variants = ([] if args.no_plain else [("base", {})]) + [parse_variant(v) for v in args.variant]
    ids = torch.randint(5, BASE["vocab_size"], (args.batch, args.tokens), device=dev)
    rows, tables = [], {}
    for i, (name, values) in enumerate(variants):
        torch.manual_seed(0)
        os.environ["GENOLIN_NORM_CONV"] = str(values.get("norm_conv", "auto"))  # "reference": the modules' path
        os.environ["GENOLIN_FUSED"] = str(values.get("fused", "auto"))  # "reference": no fused block kernels
        model = build(values, dev)
        fn = forward_fn(model, ids, amp)
        for _ in range(args.warmup):
            fn()
        ms = [1e3 * timed(fn, dev)[0] for _ in range(args.repeats)]
        med = statistics.median(ms)
        row = {"variant": name, "settings": values, "ms": round(med, 3), "ms_min": round(min(ms), 3),
               "m_tokens_s": ids.numel() / med / 1e3,
               "gpu_peak_gib": torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else None}
        rows.append(row)
        print(f"{name:16s} {med:8.2f} ms (min {min(ms):7.2f})  {row['m_tokens_s']:7.2f} M tokens/s", flush=True)
        if i == 0 or args.profile_all:
            tables[name] = profile_table(fn, dev, args.profile_rows)
            print(tables[name], flush=True)
        del model, fn
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    meta = {**versions("encoder_forward"), "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else None,
            "cpu": cpu_name(), "amp_bf16": amp, "batch": args.batch, "tokens": args.tokens, "base": BASE,
            "command": command("encoder_forward")}
    lines = [*heading("Encoder inference forward, one batch of genome windows", meta,
                      f"{made_on(meta)}, bf16 {'on' if amp else 'off'}; batch {args.batch} x {args.tokens} tokens; "
                      "base: d_model 256, 6 layers, 8 heads, hybrid"),
             "| variant | settings | ms (median) | ms (min) | M tokens/s |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['variant']} | {r['settings'] or '-'} | {r['ms']:.2f} | {r['ms_min']:.2f} | "
              f"{r['m_tokens_s']:.2f} |" for r in rows]
    for name, table in tables.items():
        lines += ["", f"torch.profiler, {name}:", "", "```", table, "```"]
    write_result(Path(args.out), {"meta": meta, "rows": rows, "profiles": tables}, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
