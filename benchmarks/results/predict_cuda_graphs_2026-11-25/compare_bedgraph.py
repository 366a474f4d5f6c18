"""Per-base values of two `genolin predict` outputs (PREFIX.plus/minus.bedGraph, PREFIX.peaks.bed) compared:

    python compare_bedgraph.py PREFIX_A PREFIX_B
"""

import sys

import numpy as np


def per_base(path: str) -> dict[str, np.ndarray]:
    rows: dict[str, list] = {}
    for line in open(path):
        if line.startswith("track"):
            continue
        contig, a, b, v = line.split()
        rows.setdefault(contig, []).append((int(a), int(b), float(v)))
    out = {}
    for contig, r in rows.items():
        x = np.full(max(b for _, b, _ in r), np.nan, np.float32)
        for a, b, v in r:
            x[a:b] = v
        out[contig] = x
    return out


def main(a: str, b: str) -> None:
    for strand in ("plus", "minus"):
        x, y = per_base(f"{a}.{strand}.bedGraph"), per_base(f"{b}.{strand}.bedGraph")
        assert x.keys() == y.keys(), "different contigs"
        d = np.concatenate([np.abs(x[c] - y[c]) for c in x])
        print(f"{strand}: {len(d):,} bp, max |diff| {d.max():.4g}, mean |diff| {d.mean():.3g}, "
              f"bp differing {int((d > 0).sum()):,}")
    calls = [sum(1 for _ in open(f"{p}.peaks.bed")) - 1 for p in (a, b)]
    print(f"promoter calls: {calls[0]:,} / {calls[1]:,}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
