"""Two `genolin predict` bedGraph outputs (PREFIX.plus/minus.bedGraph, PREFIX.peaks.bed) compared per bin, fast
enough for 100 Mbp and more (pandas' C reader; numpy per-base arrays per contig):

    python compare_values.py PREFIX_A PREFIX_B
"""

import sys

import numpy as np
import pandas as pd


def per_base(path: str) -> dict[str, np.ndarray]:
    t = pd.read_csv(path, sep="\t", header=None, skiprows=1, names=["c", "a", "b", "v"],
                    dtype={"c": str, "a": np.int64, "b": np.int64, "v": np.float32}, engine="c")
    out = {}
    for contig, g in t.groupby("c", sort=False):
        a, b, v = g["a"].to_numpy(), g["b"].to_numpy(), g["v"].to_numpy()
        assert a[0] == 0 and (a[1:] == b[:-1]).all(), f"{path}: gaps in {contig}"
        out[contig] = np.repeat(v, b - a)
    return out


def main(a: str, b: str) -> None:
    for strand in ("plus", "minus"):
        x, y = per_base(f"{a}.{strand}.bedGraph"), per_base(f"{b}.{strand}.bedGraph")
        assert list(x) == list(y), "different contigs"
        d = np.concatenate([np.abs(x[c] - y[c]) for c in x])
        n = d.size
        print(f"{strand}: {n:,} bases, max |difference| {d.max():.4f}, bases differing {(d > 0).sum():,} "
              f"({(d > 0).mean():.2e}), differing by more than 0.001: {(d > 1e-3).sum():,}")
    pa = [line.split()[:3] + [line.split()[5]] for line in open(f"{a}.peaks.bed") if not line.startswith("track")]
    pb = [line.split()[:3] + [line.split()[5]] for line in open(f"{b}.peaks.bed") if not line.startswith("track")]
    sa, sb = set(map(tuple, pa)), set(map(tuple, pb))
    print(f"promoters: {len(pa):,} and {len(pb):,}, {len(sa & sb):,} at the same bin and strand")


if __name__ == "__main__":
    main(*sys.argv[1:3])
