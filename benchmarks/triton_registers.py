"""Registers and spills of genolin's Triton attention kernels, compiled offline for a GPU target (no GPU needed).

Each kernel is compiled by Triton for the target (default sm_90, Hopper) as genolin launches it for bf16 inputs
(the tensor-core paths: LOWP), at the tile configs given, and its PTX is assembled with the ptxas that ships with
Triton (``-v``): registers per thread and bytes of spill stores and loads. Spills are what bound the FAVOR+
backward kernels (docs/benchmarks.md, "Attention kernels"), so a config can be screened here before it is timed on
a GPU. Figures depend on the Triton version (the GPU hosts may run another): compare within one run. The
'default' config is genolin's own (``_config``), so GENOLIN_TRITON_* variables in the environment change it.

    python benchmarks/triton_registers.py --maps elu favor --configs 128x8 64x4 32x8 \\
        --out benchmarks/results/triton_registers/sm90

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    sys.exit("triton_registers: unset TRITON_INTERPRET (a GPU target needs Triton's compiler, not its interpreter)")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # FMA fusion, as the Triton versions before 3.10 compile

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from genolin import __version__  # noqa: E402
from genolin.ops import linear_attn_triton as lat  # noqa: E402

KERNELS = ("_state_kernel", "_output_kernel", "_query_grad_kernel", "_key_grad_kernel")
BF16 = {"Q", "K", "V", "DO", "DQ", "DK", "DV", "OUT"}  # (B, N, H, D or E) tensors; other pointers are float32


def arg_type(name: str) -> str:
    """Triton signature type of a non-constexpr kernel argument, from genolin's naming."""
    if name in ("N", "L", "H"):
        return "i32"
    if name in BF16:
        return "*bf16"
    if name == "MASK":
        return "*u8"
    if name in ("D_SCALE", "LOG2_C", "EPS"):
        return "fp32"
    if name.isupper() or name.endswith("_PTR"):
        return "*fp32"
    return "i32"  # the strides


def ptxas() -> str:
    """The newest ptxas shipped with Triton (the plain one may be older than the PTX Triton writes)."""
    folder = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for name in ("ptxas-blackwell", "ptxas"):
        if (folder / name).exists():
            return str(folder / name)
    sys.exit(f"triton_registers: no ptxas under {folder}")


def compile_one(kernel: str, fmap: str, d: int, m: int, cfg: dict, arch: int) -> dict:
    """Registers and spill bytes of one kernel at one config (``_config``'s dict: tiles, warps, stages)."""
    fn = getattr(lat, kernel)
    warps, stages = cfg["num_warps"], cfg.get("num_stages")
    consts = dict(D=d, E=d, M=m, FMAP=lat.FMAPS[fmap], PRECISION="tf32", LOWP=True, FAST=True,
                  BLOCK_N=cfg["BLOCK_N"], BLOCK_D=cfg["BLOCK_D"], BLOCK_E=cfg["BLOCK_E"], BLOCK_M=cfg["BLOCK_M"],
                  HAS_MASK=False, ZDOT=True)
    if kernel == "_state_kernel":  # the forward's tensor-core z sum runs on 4 warps only (_forward_kernels)
        consts["ZDOT"] = warps == 4
    names = fn.arg_names
    signature = {a: "constexpr" if a in consts else arg_type(a) for a in names}
    # what a launch tells the compiler: pointers and strides divisible by 16 (contiguous bf16 tensors of a head
    # dimension 64, genolin's own float32 buffers); N, L are not specialised (do_not_specialize), H = 8 is not
    aligned = [i for i, a in enumerate(names) if a not in consts and (signature[a].startswith("*") or a[0] == "s")]
    src = ASTSource(fn, signature, {(names.index(a),): v for a, v in consts.items() if a in names},
                    {(i,): [["tt.divisibility", 16]] for i in aligned})
    opts = {"num_warps": warps, **({"num_stages": stages} if stages else {})}
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(compiled.asm["ptx"])
        out = subprocess.run([ptxas(), f"-arch=sm_{arch}a", "-v", str(path), "-o", os.devnull],
                             capture_output=True, text=True)
    text = out.stdout + out.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if out.returncode or not regs or not spills:
        raise RuntimeError(f"ptxas failed on {kernel}: {text[-500:]}")
    return {"registers": int(regs.group(1)), "spill_stores": int(spills.group(1)),
            "spill_loads": int(spills.group(2))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maps", nargs="+", default=["elu", "favor"], choices=sorted(lat.FMAPS))
    ap.add_argument("--d", type=int, default=64, help="head dimension D = E")
    ap.add_argument("--m", type=int, default=128, help="FAVOR+ features M")
    ap.add_argument("--configs", nargs="+", default=["default", "128x8", "64x4", "32x8", "32x4", "16x4"],
                    help="tile configs BLOCK_NxWARPS, or 'default' (genolin's own, forward and backward)")
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    ap.add_argument("--arch", type=int, default=90, help="compute capability as an integer (90: sm_90a)")
    ap.add_argument("--out", default=None, help="output prefix (PREFIX.json, PREFIX.md)")
    args = ap.parse_args()

    rows = []
    for fmap in args.maps:
        m = args.m if fmap == "favor" else args.d
        for config in args.configs:
            for kernel in args.kernels:
                backward = kernel in ("_query_grad_kernel", "_key_grad_kernel")
                cfg = lat._config(args.d, args.d, m, backward=backward)
                if config != "default":
                    cfg["BLOCK_N"], cfg["num_warps"] = (int(x) for x in config.split("x"))
                block_n, warps = cfg["BLOCK_N"], cfg["num_warps"]
                row = {"map": fmap, "kernel": kernel, "config": config, "block_n": block_n, "warps": warps,
                       "stages": cfg.get("num_stages"), **compile_one(kernel, fmap, args.d, m, cfg, args.arch)}
                rows.append(row)
                print(f"{fmap:6s} {kernel:20s} {block_n:4d} x {warps:2d} warps  {row['registers']:4d} registers  "
                      f"spills {row['spill_stores']:5d} / {row['spill_loads']:5d} bytes", flush=True)
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "triton": triton.__version__,
            "ptxas": subprocess.run([ptxas(), "--version"], capture_output=True, text=True).stdout.strip()
            .splitlines()[-1], "genolin": __version__, "arch": f"sm_{args.arch}a", "d": args.d, "m": args.m,
            "command": "python benchmarks/triton_registers.py " + " ".join(sys.argv[1:])}
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
        lines = [f"# Triton kernel registers and spills, offline ({meta['date']})", "",
                 f"Triton {meta['triton']} ({meta['ptxas']}), target {meta['arch']}, bf16 inputs, D = E = "
                 f"{args.d}, FAVOR+ M = {args.m}; genolin {__version__}", "", f"`{meta['command']}`", "",
                 "| map | kernel | BLOCK_N x warps | registers | spill stores / loads, bytes |",
                 "|---|---|---|---:|---:|"]
        lines += [f"| {r['map']} | {r['kernel']} | {r['block_n']} x {r['warps']}"
                  f"{' (default)' if r['config'] == 'default' else ''} | {r['registers']} | "
                  f"{r['spill_stores']} / {r['spill_loads']} |" for r in rows]
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
