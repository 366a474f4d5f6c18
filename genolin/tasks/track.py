"""Genome promoter tracks: genome FASTA(s) + TSS BED -> per-bin, per-strand promoter probabilities (the task's face).

``TrackTask`` is what the trainer, the predictor and the evaluator see (``genolin.tasks.base.Task``); its work is
done by role in the modules beside it, whose names this module re-exports:

    track_data      genomes keyed by contig, windows (W / s bins of s bp), their tokens, random window sampling,
                    circular contigs (``TrackData``, ``Window``, ``Region``)
    track_labels    targets (bins, 2) per window: TSSs with tolerance, repeating around a circle; the positive
                    rate and the loss's pos_weight
    track_augment   training batches: reverse complement (bins reversed, strands swapped) and base substitution
    track_scoring   regions through the model into evaluation bins per strand; metrics, the report table, what
                    of a training genome is scored (``score_regions``, ``GenomeRegions``)
    track_calls     promoter calls matched to TSSs of their strand (``call_metrics``), the call rule
    track_predict   predict's files: OUT.plus / OUT.minus tracks and OUT.peaks.bed, under torchrun in shares

Batches: ids (B, W/s), mask (B, W/s), targets (B, W/s, 2) float (channel 0: + strand, 1: - strand). Head: 2 logits
per token; loss: binary cross-entropy on real bins with ``pos_weight`` on positives (default: balancing the training
positive rate); probabilities: sigmoid of the logits minus ln(pos_weight), i.e. calibrated back to the training
positive rate (the ranking, hence AUROC / AUPRC, is unchanged).
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from genolin.config import DataSpec, TrainConfig
from genolin.errors import InputError
from genolin.io.tracks import STRANDS, TRACK_FORMATS
from genolin.peaks import resolvable_density
from genolin.tasks.base import Batch, PredictOptions, Task
from genolin.tasks.track_calls import CALL_DISTANCE_BP, CALL_DISTANCES_BP, call_metrics, call_rule
from genolin.tasks.track_data import (
    CIRCULAR_ALL,
    Region,
    TrackData,
    Window,
    check_circular,
    genome_name,
    shared_contigs,
    unique_genome_names,
)
from genolin.tasks.track_labels import auto_pos_weight
from genolin.tasks.track_predict import predict_files, predict_shares
from genolin.tasks.track_scoring import (
    GenomeRegions,
    GenomeScores,
    cell,
    report_table,
    scope_note,
    score_regions,
    scores_metrics,
    track_metrics,
    trained_bp,
)

log = logging.getLogger(__name__)

__all__ = ["CALL_DISTANCES_BP", "CALL_DISTANCE_BP", "CIRCULAR_ALL", "GenomeRegions", "GenomeScores", "Region",
           "TrackData", "TrackTask", "Window", "auto_pos_weight", "call_metrics", "call_rule", "cell",
           "check_circular", "genome_name", "scope_note", "score_regions", "shared_contigs", "track_metrics",
           "trained_bp", "unique_genome_names"]


class TrackTask(Task):
    name = "track"
    strands = STRANDS
    has_track = True
    threshold_metric = "F1"
    ensemble_shared = ("k", "stride", "window_bp", "eval_bin_bp")
    ensemble_grouped = ("k", "stride", "window_bp")
    fixed_shapes = True

    def __init__(self, cfg: TrainConfig, state: dict | None = None):
        super().__init__(cfg, state)
        self.pos_weight: float | None = (state or {}).get("pos_weight")
        # [contig, length, bp read from its start] per training contig: evaluate tells training genomes by it
        self.train_contigs: list | None = (state or {}).get("train_contigs")
        # [contig, length] per contig training or validation read as circular: evaluate and predict read a contig
        # of the same name and length as circular too
        self.circular_contigs: list | None = (state or {}).get("circular_contigs")
        # TSSs per Mbp of the training genomes that calls 100 bp apart could tell apart: predict's and evaluate's
        # default call density (None: a run from before it was kept, which calls above its threshold)
        self.tss_per_mbp: float | None = (state or {}).get("tss_per_mbp")
        self.train_regions: list[Region] = []

    def state(self) -> dict:
        return {"classes": list(self.strands), "pos_weight": self.pos_weight, "train_contigs": self.train_contigs,
                "circular_contigs": self.circular_contigs, "tss_per_mbp": self.tss_per_mbp}

    def scoring_data(self, fastas: list[str], tss_paths: list[str], circular: list[str] | tuple[str, ...]
                     ) -> TrackData:
        """Genomes to score (evaluate, predict): loaded with their TSS BEDs (none: unlabelled), the --circular names
        checked, and the contigs training read as circular (by name and length) circular too."""
        data = TrackData.load(fastas, tss_paths, self.cfg, circular)
        check_circular(circular, data)
        added = data.circles_as(self.circular_contigs)
        if added:
            log.info("read as circular, as in training: %s", ", ".join(added))
        return data

    def head(self) -> dict:
        return {"n_classes": 0, "track_channels": 2}

    def longest_tokens(self) -> int:
        return self.cfg.window_bp // self.cfg.stride

    def largest_batch(self) -> tuple[int, str]:
        return (self.cfg.batch_size * self.longest_tokens(),
                f"{self.cfg.batch_size} windows of {self.cfg.window_bp:,} bp, {self.longest_tokens():,} tokens each")

    # -- training ----------------------------------------------------------------------------------------------
    def load_training(self, spec: DataSpec) -> None:
        cfg = self.cfg
        self.train = TrackData.load(spec.fasta, spec.tss, cfg, spec.circular)
        if spec.val_fasta:
            val = TrackData.load(spec.val_fasta, spec.val_tss, cfg, spec.circular)
            check_circular(spec.circular, self.train, val)
            self.val_set = GenomeRegions(val, val.whole())
            regions = self.train.whole()
        else:
            check_circular(spec.circular, self.train)
            regions, val_regions = self.train.split(cfg.val_fraction)
            self.val_set = GenomeRegions(self.train, val_regions)
        self.train_regions = self.train.check_fits(regions, "training part")
        self.train_contigs = [[self.train.contig_name(c), self.train.lengths[c], b] for c, _, b in self.train_regions]
        self.circular_contigs = sorted({(d.contig_name(c), d.lengths[c]) for d in (self.train, self.val_set.data)
                                        for c in d.circular})
        rate = self.train.positive_rate(self.train_regions)
        self.pos_weight = cfg.pos_weight if cfg.pos_weight is not None else auto_pos_weight(rate)
        self.tss_per_mbp = resolvable_density([pos for pair in self.train.tss.values() for pos in pair],
                                              sum(self.train.lengths.values()), CALL_DISTANCE_BP)
        self._loss_weight = torch.tensor([self.pos_weight, self.pos_weight])
        val = self.val_set.data
        val_bp = {g: 0 for g in val.genome_names}
        for contig, a, b in self.val_set.regions:
            val_bp[val.genome_of(contig)] += b - a
        log.info("track: %d genome(s) (%s), %d training region(s), positive rate %.5f, pos_weight %.1f, %.0f TSSs "
                 "per Mbp %d bp apart; validation: %s", len(self.train.genomes), ", ".join(self.train.genome_names),
                 len(self.train_regions), rate, self.pos_weight, self.tss_per_mbp, CALL_DISTANCE_BP,
                 ", ".join(f"{g} {n:,} bp" for g, n in val_bp.items()))
        if len(self.train.genomes) > 1:
            shares = self.train.genome_shares(self.train_regions, cfg.genome_weights)
            log.info("training windows drawn per genome (genome_weights %s): %s", cfg.genome_weights,
                     ", ".join(f"{g} {share:.1%}" for g, share in shares.items()))

    def distil_from(self, soft) -> None:
        """Mix a teacher's probabilities over the training regions (``track_distill.SoftTracks``) into the training
        targets, with weight ``distill_weight``."""
        self.train.soft = soft
        self.train.soft_weight = self.cfg.distill_weight
        log.info("distillation: targets are %.2f x TSS labels + %.2f x the teacher's probabilities (distill_weight)",
                 1 - self.cfg.distill_weight, self.cfg.distill_weight)

    def epoch_batches(self, rng: np.random.Generator, n_batches: int | None = None) -> list[list[Window]]:
        bs = self.cfg.batch_size
        count = n_batches * bs if n_batches else self.cfg.windows_per_epoch
        windows = self.train.random_windows(self.train_regions, rng, count, self.cfg.genome_weights)
        return [windows[i:i + bs] for i in range(0, len(windows), bs)]

    def collate(self, items: list[Window], rng: np.random.Generator | None, progress: float = 1.0) -> Batch:
        return self.train.collate(items, rng, rc_prob=self.cfg.rc_prob, mutate_prob=self.cfg.mutate_prob)

    def loss(self, out, batch: Batch) -> torch.Tensor:
        """Positive-weighted binary cross-entropy over the real bins; with ``focal_gamma`` g > 0 each term is
        scaled by (1 - p_t)^g, p_t the probability given to the true class (focal loss)."""
        if batch.full:  # every position (the same elements in the same order as the mask's; no host sync)
            logits, targets = out.track.float().flatten(0, 1), batch.targets.flatten(0, 1)
        else:
            logits, targets = out.track.float()[batch.mask], batch.targets[batch.mask]
        weight = self.weight_on(logits.device)
        if not self.cfg.focal_gamma:
            return F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight)
        terms = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight, reduction="none")
        p = torch.sigmoid(logits)
        p_t = torch.where(targets > 0.5, p, 1 - p)
        return ((1 - p_t) ** self.cfg.focal_gamma * terms).mean()

    # -- scoring -----------------------------------------------------------------------------------------------
    def log_odds(self, out) -> torch.Tensor:
        """(B, T, 2) per-bin log-odds, prior-corrected for the positive weight used in training: weighting
        positives by w multiplies the odds the model learns by w, so ln(w) is subtracted from the logits."""
        shift = math.log(self.pos_weight) if self.pos_weight and self.pos_weight > 0 else 0.0
        return out.track.float() - shift

    def probabilities(self, out) -> torch.Tensor:
        """(B, T, 2) per-bin probabilities: the sigmoid of ``log_odds``."""
        return torch.sigmoid(self.log_odds(out))

    def load_evaluation(self, inputs: DataSpec, *, held_out: bool | None = None) -> GenomeRegions:
        """Every bin of the genomes, but of contigs this run trained on only what training left out (None); the
        end of each contig that training holds out (True); or every bin, training part included (False)."""
        if not (inputs.fasta and inputs.tss) or inputs.csv:
            raise InputError(None, "a track model is evaluated on --fasta GENOME --tss TSS.bed")
        data = self.scoring_data(inputs.fasta, inputs.tss, inputs.circular)
        trained = trained_bp(self.train_contigs, data)
        if held_out is None:
            regions = [(c, max(a, trained.get(c, 0)), b) for c, a, b in data.whole() if trained.get(c, 0) < b]
        else:
            regions = data.split(self.cfg.val_fraction)[1] if held_out else data.whole()
        if not regions:
            why = "no held-out bins" if held_out else "this run trained on every base of these genomes"
            raise InputError(None, f"nothing to evaluate: {why} (--whole-genome scores them anyway)")
        return GenomeRegions(data, regions, scope_note(self.train_contigs, data, trained, regions, held_out))

    def evaluate(self, predictor, eval_set: GenomeRegions, *, rc_average: bool = False, threshold: float | None = None,
                 min_distance_bp: int = 100, calls_per_mbp: float | None = None, progress: bool | None = None,
                 calibration: bool = False) -> tuple[dict, dict]:
        """Metrics per genome and over all genomes (bins of ``eval_bin_bp``; MCC/F1 at ``threshold``, 0.5 if None;
        calls at that threshold, or with ``calls_per_mbp`` the genome's most probable local maxima at that density);
        "score" is the mean over genomes of their pooled AUPRC; "best_threshold" the max-F1 threshold on the pooled
        bins. The second value maps genome -> GenomeScores (with ``calibration``, each with its
        ``CalibrationData``)."""
        threshold = 0.5 if threshold is None else threshold
        scores = score_regions(predictor, eval_set.data, eval_set.regions, bin_bp=self.cfg.eval_bin_bp,
                               threshold=threshold, min_distance_bp=min_distance_bp, rc_average=rc_average,
                               calls_per_mbp=calls_per_mbp, progress=progress, calibration=calibration)
        metrics = scores_metrics(scores, threshold=threshold, calls_per_mbp=calls_per_mbp, bin_bp=self.cfg.eval_bin_bp)
        if eval_set.note:
            metrics["training_overlap"] = eval_set.note
        return metrics, scores

    # -- reports -----------------------------------------------------------------------------------------------
    def curves(self, scores: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """One curve per genome, both strands pooled."""
        return {name: (g.y.reshape(-1), g.p.reshape(-1)) for name, g in scores.items()}

    def report_lines(self, metrics: dict) -> list[str]:
        return report_table(metrics)

    def summary(self, metrics: dict) -> str:
        parts = [f"{name} AUPRC {m['pooled'].get('auprc', float('nan')):.4f} (positive rate "
                 f"{m['pooled']['positive_rate']:.4f})" for name, m in metrics["genomes"].items()]
        return ", ".join(parts) + f"; mean AUPRC {metrics['score']:.4f}"

    def describe(self, inputs: DataSpec, held_out: bool = False) -> str:
        return (f"genolin track evaluation: {', '.join(inputs.fasta)} against {', '.join(inputs.tss)}"
                + (" (held-out contig ends)" if held_out else ""))

    # -- outputs -----------------------------------------------------------------------------------------------
    def predict(self, predictor, inputs: DataSpec, out: str | os.PathLike, options: PredictOptions) -> str:
        """OUT.plus / OUT.minus (.bedGraph, or .bw with track_format "bigwig"), OUT.peaks.bed and OUT.gff3 for every
        contig of the genome(s) (``genolin.io.tracks``); with ``options.genes`` the calls linked to its genes and
        OUT.genes.tsv. Under torchrun the ranks share the batches of windows, every rank
        gets every bin, and rank 0 writes the plus strand and the calls, rank 1 the minus strand
        (``track_predict.predict_shares``). Records with no bases, contigs shorter than k or than the training window
        and a genome largely N are warned of first (``track_predict.warn_inputs``)."""
        if inputs.csv or not inputs.fasta:
            raise InputError(None, "a track model predicts on genome FASTA files (--fasta)")
        if str(out) == "-":
            raise InputError("--out", "'-' is standard output, but a track model writes three files (OUT.plus, "
                                      "OUT.minus and OUT.peaks.bed): give a prefix")
        if options.track_format not in TRACK_FORMATS:
            raise InputError(None, f"unknown track format {options.track_format!r}; choose from "
                                   f"{', '.join(TRACK_FORMATS)}")
        data = self.scoring_data(inputs.fasta, [], inputs.circular)
        if data.qualified:
            raise InputError(None, "these genomes share contig names, which one bedGraph cannot tell apart: predict "
                                   "one genome at a time")
        regions = data.whole()
        if not any(b > a for _, a, b in regions):  # records with no bases only: empty tracks would look like a result
            raise InputError(inputs.fasta[0], "no record holds any bases: nothing to predict")
        if options.contigs:
            missing = [c for c in options.contigs if c not in data.lengths]
            if missing:
                names = list(data.lengths)
                raise InputError(inputs.fasta[0], f"no contig {missing[0]!r} (--contig); its contigs: "
                                                  f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''}")
            regions = [r for r in regions if r[0] in set(options.contigs)]
        genes = None
        if options.genes:
            from genolin.io.annotation import read_genes

            genes = read_genes(options.genes, data.lengths)
            log.info("genes: %d from %s; calls linked to them in %s.gff3 and %s.genes.tsv", len(genes), options.genes,
                     out, out)
        if predictor.writes:  # what the outputs will lack, before the work
            from genolin.tasks.track_predict import warn_inputs

            warn_inputs(data, regions, options)
        if predictor.dist.world > 1:
            return predict_shares(predictor, data, regions, str(out), options, self.cfg.stride, genes)
        return predict_files(predictor, data, regions, str(out), options, self.cfg.stride, genes)
