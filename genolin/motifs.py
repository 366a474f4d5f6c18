"""Motifs behind attributions: TF-MoDISco (modisco-lite) on per-base attributions, each motif matched to a small
bundled set of known promoter elements (TOMTOM, memelite), written as MEME and logos.

    discover(one_hot (n, L, 4), hypothetical (n, L, 4)) -> [Motif]: ppm (W, 4), contribution (W, 4), seqlets, sign
    match(motifs) -> each motif's best known element and its TOMTOM p-value
    write_motifs(DIR, motifs) -> DIR/motifs.meme, DIR/motifs.tsv, DIR/motif_logos/*.png

The known elements (``KNOWN``) are consensus sequences written out as position probability matrices (each
IUPAC letter's bases equally likely, smoothed by 0.02): bacterial sigma70 -10 and -35 boxes and the extended
-10, eukaryotic TATA box, initiator, CCAAT box and GC box; a genome's motifs are matched only against the elements
of its domain (``DOMAINS``: bacteria, eukaryotes, or any). They are textbook consensuses, not fitted matrices:
a match says "looks like a -10 box", nothing finer. TOMTOM's p-values take their background from the target
columns, so over 7 targets they are rough (memelite warns below 25): read them as a ranking. The best match is
always named, as the closest of the seven, but only a p-value under ``MATCH_P`` (0.05) counts as a match: weaker
ones are marked "no" in motifs.tsv's ``significant`` column and "weak" on the logo (e.g. a GC box at p 0.36 says
that none of the seven fits).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MATCH_P = 0.05  # a motif's best known element counts as a match below this TOMTOM p-value

IUPAC = {"A": "A", "C": "C", "G": "G", "T": "T", "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
         "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT"}
KNOWN = {  # name -> consensus
    "sigma70 -10 box": "TATAAT",
    "sigma70 -35 box": "TTGACA",
    "extended -10 box": "TGNTATAAT",
    "TATA box": "TATAWAWR",
    "initiator (Inr)": "YYANWYY",
    "CCAAT box": "GGCCAATCT",
    "GC box (Sp1)": "GGGGCGGGG",
}
DOMAINS = {  # the elements a genome's promoters may hold: a bacterial genome's motif is never named a TATA box
    "bacteria": ("sigma70 -10 box", "sigma70 -35 box", "extended -10 box"),
    "eukaryotes": ("TATA box", "initiator (Inr)", "CCAAT box", "GC box (Sp1)"),
    "any": tuple(KNOWN),
}


def consensus_ppm(consensus: str, smoothing: float = 0.02) -> np.ndarray:
    """IUPAC consensus -> (W, 4) probabilities (A, C, G, T)."""
    out = np.zeros((len(consensus), 4))
    for i, letter in enumerate(consensus.upper()):
        for base in IUPAC[letter]:
            out[i, "ACGT".index(base)] = 1.0 / len(IUPAC[letter])
    return (out + smoothing) / (1 + 4 * smoothing)


@dataclass
class Motif:
    name: str
    sign: str  # "positive" (raises the score) or "negative"
    ppm: np.ndarray  # (W, 4) base frequencies of its seqlets
    contribution: np.ndarray  # (W, 4) mean contribution (attribution at the observed bases)
    seqlets: int
    match: str = ""
    match_p: float = float("nan")
    consensus: str = field(default="")

    @property
    def significant(self) -> bool:
        """Whether the best known element is a match (TOMTOM p < MATCH_P), not only the closest of a few."""
        return bool(self.match_p < MATCH_P)


# fewer regions than this rarely give TF-MoDISco clusters of ``min_cluster`` (20) seqlets: one promoter holds one or
# two elements, and its seqlet FDR needs background windows to compare against
MOTIF_MIN_REGIONS = 100


def discover(one_hot: np.ndarray, hypothetical: np.ndarray, *, window: int = 15, flank: int = 5,
             min_cluster: int = 20, max_seqlets: int = 20_000) -> list[Motif]:
    """TF-MoDISco on (n, L, 4) one-hot sequences and hypothetical contributions; [] when too few seqlets.
    Sizes are for promoter-sized inputs (sliding window 15, flanks 5, clusters of >= ``min_cluster`` seqlets)."""
    from modiscolite.tfmodisco import TFMoDISco

    one_hot = np.ascontiguousarray(one_hot, dtype=np.float32)
    hypothetical = np.ascontiguousarray(hypothetical, dtype=np.float32)
    try:
        pos, neg = TFMoDISco(one_hot=one_hot, hypothetical_contribs=hypothetical, sliding_window_size=window,
                             flank_size=flank, min_metacluster_size=min_cluster, final_min_cluster_size=min_cluster,
                             max_seqlets_per_metacluster=max_seqlets, target_seqlet_fdr=0.2,
                             trim_to_window_size=window, initial_flank_to_add=flank, min_num_to_trim_to=min_cluster,
                             verbose=False)  # modisco's trimming defaults (30 bp) are longer than these seqlets
    except (ValueError, IndexError, RuntimeError) as exc:  # too few seqlets to cluster
        log.warning("motifs: TF-MoDISco found nothing to cluster (%s)", exc)
        return []
    out = []
    for sign, patterns in (("positive", pos), ("negative", neg)):
        for i, p in enumerate(patterns or []):
            ppm = np.asarray(p.sequence, dtype=np.float64)
            out.append(Motif(f"{sign}_{i}", sign, ppm, np.asarray(p.contrib_scores, dtype=np.float64),
                             len(p.seqlets), consensus="".join("ACGT"[j] for j in ppm.argmax(1))))
    return out


def trim(m: Motif, fraction: float = 0.25) -> Motif:
    """The motif cut to the positions whose summed |contribution| is >= ``fraction`` of the largest."""
    weight = np.abs(m.contribution).sum(1)
    keep = np.flatnonzero(weight >= fraction * weight.max())
    a, b = keep[0], keep[-1] + 1
    return Motif(m.name, m.sign, m.ppm[a:b], m.contribution[a:b], m.seqlets, consensus=m.consensus[a:b])


def match(motifs: list[Motif], domain: str = "any") -> list[Motif]:
    """Each motif (trimmed) with its best known element of ``domain`` (``DOMAINS``) by TOMTOM p-value (both
    strands)."""
    from memelite import tomtom

    if not motifs:
        return []
    trimmed = [trim(m) for m in motifs]
    names = list(DOMAINS[domain])
    targets = [consensus_ppm(KNOWN[n]).T.copy() for n in names]
    with warnings.catch_warnings():  # memelite warns that p-values over < 25 targets depend on the target set
        warnings.simplefilter("ignore", UserWarning)
        p = tomtom([m.ppm.T.copy() for m in trimmed], targets)[0]
    for m, row in zip(trimmed, p, strict=True):
        j = int(np.nanargmin(row))
        m.match, m.match_p = names[j], float(row[j])
    return trimmed


def write_meme(path: Path, motifs: list[Motif]) -> None:
    from genolin.io.atomic import atomic_open

    with atomic_open(path) as fh:
        fh.write("MEME version 4\n\nALPHABET= ACGT\n\nstrands: + -\n\nBackground letter frequencies\n"
                 "A 0.25 C 0.25 G 0.25 T 0.25\n\n")
        for m in motifs:
            fh.write(f"MOTIF {m.name} {m.consensus}\nletter-probability matrix: alength= 4 w= {len(m.ppm)} "
                     f"nsites= {m.seqlets} E= 0\n")
            fh.writelines(" ".join(f"{v:.6f}" for v in row) + "\n" for row in m.ppm / m.ppm.sum(1, keepdims=True))
            fh.write("\n")


def write_motifs(out: Path, motifs: list[Motif]) -> str:
    """motifs.meme, motifs.tsv (name, sign, seqlets, consensus, best known match, p, whether p < MATCH_P) and
    motif logos."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from genolin.io.atomic import atomic_open, atomic_path

    out.mkdir(parents=True, exist_ok=True)
    write_meme(out / "motifs.meme", motifs)
    with atomic_open(out / "motifs.tsv") as fh:
        fh.write("motif\tsign\tseqlets\tconsensus\tbest_known_match\ttomtom_p\tsignificant\n")
        for m in motifs:
            fh.write(f"{m.name}\t{m.sign}\t{m.seqlets}\t{m.consensus}\t{m.match}\t{m.match_p:.3g}\t"
                     f"{'yes' if m.significant else 'no'}\n")
    (out / "motif_logos").mkdir(exist_ok=True)
    for m in motifs:
        fig, ax = plt.subplots(figsize=(max(4.5, len(m.ppm) * 0.4), 2.4))
        logomaker.Logo(pd.DataFrame(m.contribution, columns=list("ACGT")), ax=ax, color_scheme="classic")
        weak = "" if m.significant else f", weak: p >= {MATCH_P}"
        # two lines: a long consensus and match name fit a logo of a few bases' width
        ax.set_title(f"{m.name} ({m.seqlets} seqlets): {m.consensus}\n~ {m.match} (p {m.match_p:.2g}{weak})",
                     fontsize=8)
        fig.tight_layout()
        with atomic_path(out / "motif_logos" / f"{m.name}.png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
    return f"{len(motifs)} motifs -> {out}/motifs.meme, motifs.tsv"


__all__ = ["DOMAINS", "KNOWN", "MATCH_P", "Motif", "consensus_ppm", "discover", "match", "trim", "write_meme",
           "write_motifs"]
