"""What every task shares: the token batch, padding, and the Task interface.

A batch: ids (B, T) int64 ([PAD] = 0), mask (B, T) bool (True = real token), and the task's targets: labels (B,)
int64 for sequence classes, or targets (B, T, 2) float32 for per-bin, per-strand tracks.

A task (``genolin.tasks.sequence.SequenceTask``, ``genolin.tasks.track.TrackTask``) owns everything that depends
on what is learned, so the trainer, the predictor and the evaluator never ask which task they run:

    kind       has_track, threshold_metric, ensemble_shared, shift_averaging; default_views(cfg) (the views
               predict and evaluate average by default); longest_input_bp(spec) (what chooses a preset's recipe)
    training   load_training(spec) -> self.train / self.val_set; epoch_batches(rng); collate(items, rng);
               head() (the encoder's n_classes / track_channels); longest_tokens() (a length-limited mixer's
               max_len); init_model(model) (fits before training); loss(out, batch); state() (saved in config.json)
    scoring    probabilities(out); load_evaluation(inputs, held_out); evaluate(predictor, eval_set) -> (metrics
               with "score", the number validation maximises; what curves() plots): the one scoring path of
               validation during training and of ``genolin evaluate``
    reports    curves(scored), report_lines(metrics), summary(metrics), describe(inputs, held_out)
    outputs    predict(predictor, inputs, out, options): the prediction files of ``genolin predict``

``predictor`` is a ``genolin.inference.Predictor`` (passed in: tasks sit below inference and never import it).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from genolin.config import DataSpec, TrainConfig
from genolin.errors import InputError
from genolin.tokenize import PAD


@dataclass
class Batch:
    ids: torch.Tensor  # (B, T) int64
    mask: torch.Tensor  # (B, T) bool
    labels: torch.Tensor | None = None  # (B,) int64
    targets: torch.Tensor | None = None  # (B, T, 2) float32

    # made on the host with the batch (``counted``): no device sync to read them in the training loop
    n_tokens: int | None = None  # real (not padding) tokens
    full: bool = False  # no padding: a loss may take every position without indexing by the mask

    def counted(self) -> Batch:
        """The batch with ``n_tokens`` and ``full`` read from its (host) mask."""
        n = int(self.mask.sum())
        return dataclasses.replace(self, n_tokens=n, full=n == self.mask.numel())

    def pinned(self) -> Batch:
        """The batch in page-locked host memory (CUDA): its copy to the device does not wait for the host."""
        return dataclasses.replace(self, **{f: getattr(self, f).pin_memory() for f in TENSORS
                                            if getattr(self, f) is not None})

    def to(self, device) -> Batch:
        return dataclasses.replace(self, **{f: getattr(self, f).to(device, non_blocking=True) for f in TENSORS
                                            if getattr(self, f) is not None})


TENSORS = ("ids", "mask", "labels", "targets")  # Batch's tensor fields


WIDTH_STEPS = 8  # the widths per octave a batch of cropped sequences is padded to (bucket_width)


def bucket_width(width: int) -> int:
    """``width`` rounded up to one of WIDTH_STEPS widths per octave, at most 1/WIDTH_STEPS more (a width in
    [2^p, 2^(p+1)) to a multiple of 2^p / WIDTH_STEPS). Batches of randomly cropped sequences then take a few dozen
    shapes over a run, not one per step, so what a device keeps per shape (cuDNN plans, kernel variants, pinned
    blocks) stays bounded; the extra columns are padding, which the model ignores. (SequenceData.collate never pads
    past a batch's uncropped width: a batch no crop shortened keeps its own.)"""
    step = bucket_step(width)
    return -(-width // step) * step


def bucket_step(width: int) -> int:
    """The spacing of ``bucket_width``'s widths around ``width``: 2^p / WIDTH_STEPS for a width in [2^p, 2^(p+1)),
    at least 1."""
    return max(1, (1 << (max(1, width).bit_length() - 1)) // WIDTH_STEPS)


def pad_tokens(token_arrays: list[np.ndarray], shape: tuple[int, int] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token arrays of different lengths: ids (B, T) padded with [PAD], mask (B, T). ``shape``: pad to
    at least these (rows, tokens)."""
    width = max(1, max(len(t) for t in token_arrays))
    rows = len(token_arrays)
    if shape is not None:
        rows, width = max(rows, shape[0]), max(width, shape[1])
    ids = np.full((rows, width), PAD, dtype=np.int64)
    for i, t in enumerate(token_arrays):
        ids[i, : len(t)] = t
    ids_t = torch.from_numpy(ids)
    return ids_t, ids_t != PAD


@dataclass
class PredictOptions:
    rc_average: bool = False
    threshold: float = 0.5  # decision threshold: track calls; the last class of a two-class classifier
    min_distance_bp: int = 100  # track: calls on one strand at least this far apart
    # track: each contig's most probable local maxima at this many per Mbp (peaks.density_quotas) instead of those at
    # or above threshold (the CLI's default: the run's training TSS density, Run.call_density)
    calls_per_mbp: float | None = None
    track_format: str = "bedgraph"  # track: per-strand values as bedgraph or bigwig
    contigs: tuple[str, ...] = ()  # track: only these contigs (in the FASTA's order); () = all
    progress: bool | None = None
    # track: a gene annotation (GFF3 or GenBank) whose genes the calls are linked to (OUT.gff3, OUT.genes.tsv)
    genes: str | None = None


class Task(ABC):
    """The interface (see the module docstring). Holds the run's settings, and after ``load_training`` the
    training data (``train``) and what validation scores (``val_set``, or None)."""

    name: str = ""
    # per-bin genome tracks, read through windows of a genome (``Predictor.region_probs``), not one probability
    # per sequence
    has_track: bool = False
    # what the decision threshold stored with the weights maximises on validation (logged with it)
    threshold_metric: str = "score"
    # training settings the members of an ensemble share, so that they see the same batches
    ensemble_shared: tuple[str, ...] = ("k", "stride")
    # of those, the settings whose members may differ: they run in groups, each its own pass over the input, the
    # groups' outputs averaged at the finest stride (tracks: members of several strides, each reading its windows)
    ensemble_grouped: tuple[str, ...] = ()
    # whether probabilities can also be averaged over inputs with leading bases dropped (--shift-average)
    shift_averaging: bool = False
    # every training batch has one shape (track windows): a training step can replay a CUDA graph (train_graph)
    fixed_shapes: bool = False

    def collate_reads_progress(self) -> bool:
        """Whether ``collate`` depends on the schedule's progress (then batches are not made ahead of their step)."""
        return False

    def varied_shapes(self) -> bool:
        """Whether training batches come in widths that keep changing through the run (cropped sequences): then
        training and its validations run without cuDNN (``genolin.device.shape_free_kernels``), which would plan
        every new shape."""
        return False

    @classmethod
    def default_views(cls, cfg: TrainConfig) -> tuple[bool, int]:
        """(both strands averaged, shift views) that predict and evaluate use unless told otherwise. Default: the
        input as given."""
        return False, 0

    @classmethod
    def longest_input_bp(cls, spec: DataSpec) -> int | None:
        """The longest input sequence of ``spec``'s training and validation files, which chooses the preset's
        recipe (``genolin.config.make_config``); None: not read by length (default)."""
        return None

    def __init__(self, cfg: TrainConfig, state: dict | None = None):
        self.cfg = cfg
        self.train = None
        self.val_set = None
        self._loss_weight: torch.Tensor | None = None

    def weight_on(self, device) -> torch.Tensor | None:
        """The loss weight tensor (class weights or pos_weight) on ``device``, moved there once."""
        if self._loss_weight is not None and self._loss_weight.device != torch.device(device):
            self._loss_weight = self._loss_weight.to(device)
        return self._loss_weight

    @abstractmethod
    def state(self) -> dict:
        """What config.json keeps of the task (classes; pos_weight)."""

    @abstractmethod
    def head(self) -> dict:
        """The encoder's heads: {"n_classes": C, "track_channels": T}."""

    @abstractmethod
    def longest_tokens(self) -> int:
        """The longest training input in tokens (after ``load_training``)."""

    # parameter name -> value: another fit of what ``init_model`` set, which the trainer validates beside the
    # start and keeps as the epoch-0 weights when it scores at least as well (training still starts as set)
    start_alternative: dict[str, torch.Tensor] | None = None

    def init_model(self, model) -> bool:
        """Set what the task can fit before training (a new run, not a resumed one); True when it did, so the
        trainer validates the model before the first step (and ``start_alternative``, if set). Default: nothing."""
        return False

    @abstractmethod
    def largest_batch(self) -> tuple[int, str]:
        """(tokens, rows x padded length, of the largest training batch; what makes it, in words), after
        ``load_training``: what the memory guard sizes a training step by."""

    @abstractmethod
    def load_training(self, spec: DataSpec) -> None:
        """Read the training and validation data of ``spec`` into ``train`` and ``val_set``."""

    def distil_from(self, soft) -> None:
        """Train against a teacher's probabilities too (after ``load_training``); tracks only."""
        raise InputError("--teacher", f"distillation trains track models; this is a {self.name} task")

    @abstractmethod
    def epoch_batches(self, rng: np.random.Generator, n_batches: int | None = None) -> list:
        """One epoch's batches of training items (indices or windows), in order; ``n_batches`` where the task
        samples its items (tracks: windows at random offsets), else one pass over the data."""

    @abstractmethod
    def collate(self, items, rng: np.random.Generator | None, progress: float = 1.0) -> Batch:
        """Training items -> a Batch, augmented from ``rng``; ``progress``: the schedule's progress, 0 to 1 (for
        augmentation that changes over training)."""

    @abstractmethod
    def loss(self, out, batch: Batch) -> torch.Tensor:
        """The scalar training loss of an EncoderOutput on its batch."""

    @abstractmethod
    def probabilities(self, out) -> torch.Tensor:
        """EncoderOutput -> probabilities (float32)."""

    @abstractmethod
    def load_evaluation(self, inputs: DataSpec, *, held_out: bool | None = None):
        """Labelled data to score (``genolin evaluate``'s inputs); ``held_out`` (tracks): what of a genome is
        scored (see ``genolin.evaluate``)."""

    @abstractmethod
    def evaluate(self, predictor, eval_set, *, rc_average: bool = False, threshold: float | None = None,
                 min_distance_bp: int = 100, calls_per_mbp: float | None = None, progress: bool | None = None
                 ) -> tuple[dict, object]:
        """(metrics with "score", the number validation maximises; what ``curves`` plots) of the model behind
        ``predictor`` on ``eval_set``: the one scoring path of validation and ``genolin evaluate``."""

    @abstractmethod
    def curves(self, scored) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Named (y, score) pairs for the ROC and PR plots."""
