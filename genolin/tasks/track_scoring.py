"""Scoring of the track task: genome regions through the model, scored in evaluation bins and by their calls.

Genome regions (``GenomeRegions``) stream through overlapping windows (``Predictor.region_probs``; bins made only of
N get probability 0) and are scored per genome and over all genomes, in evaluation bins of ``eval_bin_bp`` (default
50 bp) per strand: a bin is positive when a TSS of its strand lies inside it, its score is the highest model-bin
probability inside it (AUROC, AUPRC with the positive rate, MCC/F1 at a threshold). Promoter calls (the peaks of
``genolin predict``: at a call density or a threshold) are matched to TSSs of their strand (``track_calls``):
precision and recall within 20 and 100 bp, calls per Mbp. The validation score is the mean over genomes of their
pooled AUPRC. Validation during training and ``genolin evaluate`` share this one path: the held-out end of each
contig (``val_fraction``; ``evaluate --held-out``) or whole genomes (``--val-fasta``; ``evaluate`` on other
genomes). A whole circular contig is scored as a circle: its calls are decided with the bins across the origin as
neighbours, and matched to TSSs around it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from genolin.calibrate import PEAKS_PER_MBP, CalibrationData
from genolin.peaks import StrandedPeaks, density_quotas
from genolin.tasks.metrics import binary_metrics, max_f1_threshold
from genolin.tasks.track_calls import call_metrics, call_positions
from genolin.tasks.track_data import Region, TrackData

log = logging.getLogger(__name__)


@dataclass
class GenomeRegions:
    """What a track model is scored on: regions of genomes, every bin of them."""

    data: TrackData
    regions: list[Region]
    note: str = ""  # what was scored, when a genome overlaps the run's training data


@dataclass
class GenomeScores:
    """One genome's scores: evaluation bins (n, 2) of targets and max probabilities, calls and annotated TSSs."""

    y: np.ndarray  # (n, 2) int8: a TSS of that strand in the bin
    p: np.ndarray  # (n, 2) float32: the highest bin probability inside the evaluation bin
    calls: dict  # (contig, strand) -> sorted positions of called promoters (bin centres, bp)
    tss: dict  # (contig, strand) -> sorted TSS positions inside the scored regions
    bp: int  # bases scored
    circles: dict = dataclasses.field(default_factory=dict)  # (contig, strand) -> length, for whole circles
    call_threshold: float | None = 0.5  # the calls' probability threshold: the one given, or a density's lowest cut
    calibration: CalibrationData | None = None  # with score_regions(calibration=True)


def track_metrics(y: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> dict:
    """y, probs (n_bins, 2): metrics for the + strand, the - strand and both pooled."""
    return {
        "plus": binary_metrics(y[:, 0], probs[:, 0], threshold),
        "minus": binary_metrics(y[:, 1], probs[:, 1], threshold),
        "pooled": binary_metrics(y.reshape(-1), probs.reshape(-1), threshold),
    }


def score_regions(predictor, data: TrackData, regions: list[Region], *, bin_bp: int, threshold: float,
                  min_distance_bp: int, rc_average: bool = False, calls_per_mbp: float | None = None,
                  progress: bool | None = None, calibration: bool = False) -> dict[str, GenomeScores]:
    """Every region streamed through the model; per genome (in order): evaluation bins of ``bin_bp`` (target: a TSS
    of the strand inside, score: the highest model-bin probability overlapping it), and promoter calls
    (``StrandedPeaks``: local maxima at ``threshold``, ``min_distance_bp`` apart; with ``calls_per_mbp``, instead
    each region's most probable local maxima, as many as its ``density_quotas`` share over the regions in order, as
    predict calls each contig) with the TSSs they are matched against. ``calibration``: also each genome's
    ``CalibrationData`` (its model bins against TSSs near, and its ``PEAKS_PER_MBP`` most probable local maxima)."""
    stride = data.stride
    parts: dict[str, dict] = {name: {"y": [], "p": [], "calls": {}, "tss": {}, "bp": 0, "circles": {}} for name in
                              dict.fromkeys(data.genome_of(c) for c, _, _ in regions)}
    quotas = density_quotas([b - a for _, a, b in regions], calls_per_mbp) if calls_per_mbp is not None else None
    for i, (contig, a, b) in enumerate(regions):
        part = parts[data.genome_of(contig)]
        e0, e1 = a // bin_bp, -(-b // bin_bp)
        y = np.zeros((e1 - e0, 2), dtype=np.int8)
        p = np.zeros((e1 - e0, 2), dtype=np.float32)
        end_bin = -(-b // stride)
        peaks = StrandedPeaks(threshold, min_distance_bp // stride,
                              {contig: end_bin} if data.wraps((contig, a, b)) else None,
                              quotas={contig: quotas[i]} if quotas is not None else None)
        found: list[tuple[int, float, str]] = []
        inside = [t[(t >= a) & (t < b)] for t in data.tss[contig]]
        if calibration:
            cal = part.setdefault("cal", CalibrationData())
            cal.bp += b - a
            top = StrandedPeaks(0.0, min_distance_bp // stride, peaks.circles,
                                quotas={contig: int((b - a) * PEAKS_PER_MBP / 1e6 + 0.5)})
            tops: list[tuple[int, float, str]] = []
        for _, first, probs in predictor.region_probs(data, [(contig, a, b)], rc_average=rc_average,
                                                      progress=progress):
            starts = (first + np.arange(len(probs))) * stride
            lo = np.maximum(starts, a) // bin_bp - e0
            hi = (np.minimum(starts + stride, b) - 1) // bin_bp - e0
            for idx in (lo, hi):  # a model bin overlaps one evaluation bin or two
                np.maximum.at(p, idx, probs)
            final = first + len(probs) == end_bin
            called = peaks.feed(contig, first, probs, final=final)
            found = found if called is None else called  # the region's calls come with its last piece
            if calibration:
                cal.add_bins(first, probs, stride, inside)
                got = top.feed(contig, first, probs, final=final)
                tops = tops if got is None else got
        if peaks.cut is not None and peaks.cut.k:  # a region with no calls to make has no cut
            part["cuts"] = part.get("cuts", []) + [peaks.cut.floor]
        if calibration:
            cal.add_peaks(tops, stride, inside)
        for strand, here in enumerate(inside):
            y[here // bin_bp - e0, strand] = 1
            part["tss"][(contig, strand)] = here
            part["calls"][(contig, strand)] = call_positions(found, "+-"[strand], stride)
            if data.wraps((contig, a, b)):
                part["circles"][(contig, strand)] = b
        part["y"].append(y)
        part["p"].append(p)
        part["bp"] += b - a
    # a density's cut differs by region: the lowest (the probability every call reaches; None: no calls to make)
    return {name: GenomeScores(np.concatenate(v["y"]), np.concatenate(v["p"]), v["calls"], v["tss"], v["bp"],
                               v["circles"], threshold if calls_per_mbp is None else min(v.get("cuts", [None])),
                               v.get("cal"))
            for name, v in parts.items()}


def scores_metrics(scores: dict[str, GenomeScores], *, threshold: float, calls_per_mbp: float | None,
                   bin_bp: int) -> dict:
    """Metrics per genome ("genomes") and over all genomes of ``score_regions``'s scores: bins (MCC/F1 at
    ``threshold``) and calls; "score" is the mean over genomes of their pooled AUPRC, "best_threshold" the max-F1
    threshold on the pooled bins."""
    genomes = {}
    for name, g in scores.items():
        genomes[name] = {**track_metrics(g.y, g.p, threshold),
                         "calls": call_metrics(g.calls, g.tss, g.bp, g.call_threshold, g.circles,
                                               calls_per_mbp), "bp": g.bp}
    y = np.concatenate([g.y for g in scores.values()])
    p = np.concatenate([g.p for g in scores.values()])
    calls = {(name, *k): v for name, g in scores.items() for k, v in g.calls.items()}
    tss = {(name, *k): v for name, g in scores.items() for k, v in g.tss.items()}
    circles = {(name, *k): v for name, g in scores.items() for k, v in g.circles.items()}
    metrics = {**track_metrics(y, p, threshold), "calls": call_metrics(
                   calls, tss, sum(g.bp for g in scores.values()), threshold if calls_per_mbp is None else None,
                   circles, calls_per_mbp), "bin_bp": bin_bp, "genomes": genomes}
    metrics["score"] = float(np.mean([m["pooled"].get("auprc", 0.0) for m in genomes.values()]))
    metrics["best_threshold"] = max_f1_threshold(y, p)
    return metrics


def cell(v, fmt: str = ".4f") -> str:
    """A report table's cell: ``v`` formatted, or "n/a"."""
    return "n/a" if v is None else format(v, fmt)


def report_table(metrics: dict) -> list[str]:
    """The report's lines of ``scores_metrics``'s metrics: what was scored, then a Markdown table of bins and calls
    per genome and strand, and over all genomes."""
    c = metrics["calls"]
    rule = (f"at threshold {c['threshold']}" if c.get("density") is None else
            f"the {c['density']:.4g} per Mbp most probable local maxima of each contig")
    lines = [f"Bins of {metrics['bin_bp']} bp per strand (a bin is positive when a TSS of its strand is in it; "
             f"its score is the highest probability inside); calls {rule}, matched to TSSs of their strand within "
             f"20 and 100 bp."
             + (f" Note: {metrics['training_overlap']}." if metrics.get("training_overlap") else ""), "",
             "| genome | strand | bins | positive rate | AUROC | AUPRC | AUPRC / rate | MCC | F1 | calls / Mbp | "
             "precision 20 / 100 bp | recall 20 / 100 bp |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [(name, m) for name, m in metrics["genomes"].items()] + [("all", metrics)]
    for name, m in rows:
        for strand in ("plus", "minus", "pooled"):
            b, c = m[strand], m["calls"]
            ratio = b["auprc"] / b["positive_rate"] if "auprc" in b and b["positive_rate"] else None
            call_cells = ("", "", "") if strand != "pooled" else (
                cell(c["calls_per_mbp"], ".1f"), f"{cell(c['precision_20bp'], '.3f')} / "
                f"{cell(c['precision_100bp'], '.3f')}", f"{cell(c['recall_20bp'], '.3f')} / "
                f"{cell(c['recall_100bp'], '.3f')}")
            lines.append(f"| {name} | {strand} | {b['n']:,} | {b['positive_rate']:.4f} | {cell(b.get('auroc'))} | "
                         f"{cell(b.get('auprc'))} | {cell(ratio, '.1f')} | {b['mcc']:.4f} | {b['f1']:.4f} | "
                         + " | ".join(call_cells) + " |")
    return lines


# -- what of a genome a run trained on is scored ---------------------------------------------------------------
def trained_bp(train_contigs: list | None, data: TrackData) -> dict[str, int]:
    """Contig key -> bases from its start that a run trained on (``train_contigs``: (name, length, end) of its
    config), for the contigs of ``data`` it trained on (known by name and length)."""
    if not train_contigs:
        return {}
    ends = {(name, length): end for name, length, end in train_contigs}
    return {c: ends[(data.contig_name(c), n)] for c, n in data.lengths.items() if (data.contig_name(c), n) in ends}


def _contig_list(data: TrackData, contigs: dict[str, int], most: int = 3) -> str:
    """"genome A contig(s) x, y; genome B ..." for the contigs with a nonzero value, at most ``most`` named each."""
    by_genome: dict[str, list[str]] = {}
    for c, value in contigs.items():
        if value:
            by_genome.setdefault(data.genome_of(c), []).append(data.contig_name(c))
    parts = []
    for genome, names in by_genome.items():
        more = f" and {len(names) - most} more" if len(names) > most else ""
        parts.append(f"genome {genome} contig{'s' if len(names) > 1 else ''} {', '.join(names[:most])}{more}")
    return "; ".join(parts)


def scope_note(train_contigs: list | None, data: TrackData, trained: dict[str, int], regions: list[Region],
               held_out: bool | None) -> str:
    """What was scored of the genomes a run trained on, in a sentence, also logged; "" without overlap."""
    if train_contigs is None and held_out is None:
        log.info("this run does not record the contigs it trained on: scoring every bin (--held-out: the end "
                 "of each contig that training holds out)")
    overlap = {c: sum(max(0, min(b, trained[c]) - a) for r, a, b in regions if r == c) for c in trained}
    if held_out is None and trained:
        note = (f"this run trained on {_contig_list(data, trained)}: scored of them only the "
                f"{sum(data.lengths[c] - e for c, e in trained.items()):,} bp that training held out "
                f"(--whole-genome scores every bin, training part included)")
    elif any(overlap.values()):
        note = (f"this run trained on {sum(overlap.values()):,} of the scored bp ({_contig_list(data, overlap)}): "
                f"metrics there are no test (evaluate's default scores only what training held out)")
    else:
        return ""
    log.warning("%s", note)
    return note
