"""Shared fixtures: paths to the copied edge-case files (tests/data), the bundled data and ../shared."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

try:  # without a GPU, Triton kernels run in its interpreter; the flag must be set before triton is imported
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:
    pass

TESTS = Path(__file__).parent
FIXTURES = TESTS / "data"
REPO = TESTS.parent
DATA = REPO / "data"
SHARED = REPO.parent / "shared" / "data"
ECOLI_BGZ = DATA / "ecoli_k12" / "NC_000913.3.fa.bgz"
GUE_TATA = DATA / "gue" / "prom_core_tata"
GENE_STARTS = DATA / "ecoli_k12" / "gene_starts.bed"


def ecoli_slice(fasta: Path, bed: Path, contig: str, lo: int, hi: int) -> list[tuple[int, str]]:
    """E. coli's bases [lo, hi) as one contig ``contig`` in ``fasta`` (one line), and the gene starts inside as its
    TSSs in ``bed`` (BED6, named g, shifted to the contig); returns those (position in the contig, strand)."""
    from genolin.io.fasta import read_fasta

    (rec,) = read_fasta(ECOLI_BGZ)
    fasta.write_text(f">{contig}\n{rec.seq[lo:hi].decode()}\n")
    rows = [line.split("\t") for line in GENE_STARTS.read_text().splitlines()]
    starts = [(int(f[1]) - lo, f[5]) for f in rows if lo <= int(f[1]) < hi]
    bed.write_text("".join(f"{contig}\t{p}\t{p + 1}\tg\t0\t{s}\n" for p, s in starts))
    return starts


def bedgraph_bases(path, length: int) -> np.ndarray:
    """Per-base values of a one-contig bedGraph, NaN where no line covers a base; each base covered once."""
    out = np.full(length, np.nan)
    for line in path.read_text().splitlines()[1:]:
        _, start, end, value = line.split("\t")
        assert np.isnan(out[int(start):int(end)]).all() and int(end) <= length
        out[int(start):int(end)] = float(value)
    assert not np.isnan(out).any()
    return out


# a test that runs torch.compile's inductor on a CPU (it builds C++) is marked with this
NEEDS_COMPILER = pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")),
                                    reason="torch.compile on a CPU needs a C++ compiler")


def fit_watching(trainer, monkeypatch, probe) -> list:
    """Run ``trainer.fit()`` (then close the trainer) -> ``probe()``'s value as each training epoch starts."""
    seen, epoch = [], trainer.train_epoch

    def watched():
        seen.append(probe())
        return epoch()

    monkeypatch.setattr(trainer, "train_epoch", watched)
    try:
        trainer.fit()
    finally:
        trainer.close()
    return seen


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason when it is not there."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{relative} (the shared data folder beside the project)")
    return path


@pytest.fixture(autouse=True)
def _cache_home(tmp_path_factory, monkeypatch):
    """Keep index files that genolin caches (for read-only folders) out of the user's home."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
