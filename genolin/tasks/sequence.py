"""Sequence classification: a labelled set (CSV/TSV, FASTA with label=, FASTA + labels TSV) -> class probabilities.

Batches: ids (B, T) int64, mask (B, T), labels (B,) int64; T = the longest sequence's tokens. Batches group
sequences of similar length (length-bucketed) under a batch size and a token budget.
Augmentation: reverse complement (the token RC map reversed at stride 1, else re-tokenizing the reverse
complement) and random shifts (up to ``max_shift_bp`` leading bases dropped).
Head: ``n_classes`` logits from the pooled encoding; loss: class-weighted cross-entropy; probabilities: softmax.
Metrics: accuracy, AUROC, AUPRC, MCC (the validation score), F1, confusion matrix.
Predictions: a TSV with columns id, length, prob_<class> for every class, pred (two classes: the last one when its
probability reaches the decision threshold; more: the most probable), has_n.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from genolin.config import LONG_SEQUENCE_BP, DataSpec, TrainConfig
from genolin.errors import InputError
from genolin.io.labelled import LabelledSet, describe_where, load_labelled, sequence_lengths
from genolin.model import LENGTH_LIMITED_MAX_TOKENS, LENGTH_LIMITED_MIXERS, kmer_profile
from genolin.tasks.base import Batch, PredictOptions, Task, bucket_step, bucket_width, pad_tokens
from genolin.tasks.metrics import classification_metrics, max_mcc_threshold
from genolin.tokenize import kmer_ids, n_tokens, reverse_complement, substitute

log = logging.getLogger(__name__)


def length_batches(lengths: np.ndarray, batch_size: int, max_tokens: int, rng: np.random.Generator | None
                   ) -> list[list[int]]:
    """Indices grouped into batches of similar length: at most ``batch_size`` items and ``max_tokens`` padded
    tokens (a longer item gets a batch of its own). Shuffled when ``rng`` is given, in a fixed order otherwise."""
    order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    pool = max(batch_size * 50, 1)
    batches: list[list[int]] = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p:p + pool].tolist(), key=lambda i: -lengths[i])
        current: list[int] = []
        for i in chunk:
            longest = lengths[current[0]] if current else lengths[i]
            if current and (len(current) >= batch_size or (len(current) + 1) * longest > max_tokens):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


class SequenceData:
    """A labelled set as tokens. ``k``/``stride`` as the tokenizer; sequences shorter than k are an error."""

    def __init__(self, dataset: LabelledSet, *, k: int, stride: int):
        self.dataset, self.k, self.stride = dataset, k, stride
        seqs = dataset.seqs
        self.bases = seqs.lengths if hasattr(seqs, "lengths") else np.array([len(s) for s in seqs], dtype=np.int64)
        short = np.flatnonzero(self.bases < k)
        if len(short):
            i = int(short[0])
            raise InputError(dataset.source, f"sequence {dataset.ids[i]!r} has {self.bases[i]} bases, fewer than "
                                             f"k = {k}")
        # tokens are made per batch from the bases (one byte each): a set's memory is its bases, not its tokens
        self.lengths = np.array([n_tokens(int(n), k, stride) for n in self.bases], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.dataset)

    def tokens_of(self, i: int, *, rc: bool = False, shift: int = 0, mutate: tuple | None = None,
                  crop: tuple[int, int] | None = None) -> np.ndarray:
        """Token ids of sequence i: cropped to bases [start, start + length) with ``crop`` (start, length),
        reverse-complemented with ``rc``, ``shift`` leading bases dropped; ``mutate`` (rng, p): its bases
        substituted at random first (``substitute``)."""
        seq = self.dataset.seqs[i]
        if crop is not None:
            seq = seq[crop[0]:crop[0] + max(crop[1], self.k)]
        if mutate is not None:
            seq = substitute(seq, *mutate)
        if rc:
            seq = reverse_complement(seq)
        if len(seq) - shift >= self.k:
            seq = seq[shift:]
        return kmer_ids(seq, self.k, self.stride)

    def batches(self, batch_size: int, max_tokens: int, rng: np.random.Generator | None = None) -> list[list[int]]:
        return length_batches(self.lengths, batch_size, max_tokens, rng)

    def largest_batch(self, batch_size: int, max_tokens: int, what: str = "") -> tuple[int, str]:
        """(padded tokens of the largest batch ``batches`` can make, at most; its longest sequence in words): a
        batch holds at most ``batch_size`` rows and ``max_tokens`` tokens, or one sequence longer than that."""
        i = int(np.argmax(self.lengths))
        longest = int(self.lengths[i])
        tokens = min(batch_size * longest, max(max_tokens, longest))
        return tokens, (f"the longest {what + ' ' if what else ''}sequence {self.dataset.ids[i]!r}: "
                        f"{int(self.bases[i]):,} bp, {longest:,} tokens")

    def collate(self, indices: list[int], rng: np.random.Generator | None = None, *, rc_prob: float = 0.0,
                max_shift: int = 0, rc: bool = False, shift: int = 0, mutate_prob: float = 0.0,
                crop: tuple[int, float] | None = None) -> Batch:
        """Tokens of ``indices``: all reverse-complemented with ``rc`` and ``shift`` leading bases dropped; with
        ``rng``, each at random (rc_prob, shifts up to max_shift bases, bases substituted with mutate_prob, and
        with ``crop`` (min_bp, u_max) cropped around its centre to a length of its own, ``crop_length``). Lengths
        differ within a batch: measured better on held-out genomes than one length per batch, though the padding
        makes a step slower (docs/benchmarks.md, "Quality of the recipe as shipped"). Cropped batches are padded to
        ``bucket_width`` (never past their sequences' uncropped width)."""
        arrays = []
        mutate = (rng, mutate_prob) if rng is not None and mutate_prob > 0 else None
        for i in indices:
            flip = rc or (rng is not None and rc_prob > 0 and rng.random() < rc_prob)
            drop = shift + (int(rng.integers(0, max_shift + 1)) if rng is not None and max_shift > 0 else 0)
            n = int(self.bases[i])
            size = crop_length(n, *crop, rng) if rng is not None and crop is not None else n
            window = ((n - size) // 2, size) if size < n else None
            arrays.append(self.tokens_of(i, rc=flip, shift=drop, mutate=mutate, crop=window))
        width = None
        if rng is not None and crop is not None:
            longest, cap = max(len(a) for a in arrays), int(self.lengths[indices].max())
            width = bucket_width(longest)
            if width > cap:  # never past the uncropped width: the widest bucket under it if the batch fits, else it
                floor = cap - cap % bucket_step(cap)
                width = floor if floor >= longest else cap
        ids, mask = pad_tokens(arrays, None if width is None else (0, width))
        return Batch(ids, mask, labels=torch.as_tensor(self.dataset.labels[indices], dtype=torch.int64))


def crop_length(length: int, min_bp: int, u_max: float, rng: np.random.Generator) -> int:
    """A crop length for a ``length``-bp sequence: length ** u * min_bp ** (1 - u), u uniform on [0, u_max];
    ``length`` itself when it is no longer than min_bp."""
    if length <= min_bp:
        return length
    u = rng.uniform(0.0, u_max) if u_max > 0 else 0.0
    return min(length, int(round(math.exp(u * math.log(length) + (1 - u) * math.log(min_bp)))))


def kmer_matrix(data: SequenceData, k_max: int, *, rc: bool = False, batch: int = 512) -> np.ndarray:
    """(n, 4 + ... + 4^k_max) float32: the model's k-mer profile (``genolin.model.kmer_profile``) of each
    sequence (of its reverse complement with ``rc``)."""
    rows = []
    for s in range(0, len(data), batch):
        ids, _ = pad_tokens([data.tokens_of(i, rc=rc) for i in range(s, min(s + batch, len(data)))])
        rows.append(kmer_profile(ids, k_max).numpy())
    return np.concatenate(rows)


def kmer_regression(train: SequenceData, val: SequenceData | None, k_max: int, seed: int, *,
                    reverse_complements: bool = False, grid=(0.1, 1.0, 10.0, 100.0),
                    converged: tuple[bool, ...] = (False,)) -> list[dict]:
    """Multinomial logistic regressions on k-mer frequencies (each k's counts over its number of windows; C
    from ``grid`` by validation MCC, 1 without validation data), one per entry of ``converged``: lbfgs stopped at
    ``max_iter=500`` and scikit-learn's tolerance, each C starting from the last fit (False), or run to a
    tolerance of 1e-6 (True). Each: {"C", "val_mcc", "weight" (n_classes, features), "bias" (n_classes,)} as
    ``model.kmer_linear`` takes them (its profile is the frequencies x 2^k, so the weights are divided by 2^k).

    ``reverse_complements``: fit on the training sequences and their reverse complements (when training
    augments with them). Stranded promoter sets lose by it: on GUE prom_300_tata the regression's test MCC fell
    from 0.446 to 0.384, prom_core_tata 0.498 -> 0.468 (the strand of a k-mer carries information)."""
    import warnings

    from scipy import sparse
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import matthews_corrcoef

    scale = np.concatenate([np.full(4**k, 2.0**k, np.float32) for k in range(1, k_max + 1)])
    y = train.dataset.labels
    x = kmer_matrix(train, k_max) / scale
    if reverse_complements:
        x, y = np.concatenate([x, kmer_matrix(train, k_max, rc=True) / scale]), np.concatenate([y, y])
    x = sparse.csr_matrix(x)
    xv = sparse.csr_matrix(kmer_matrix(val, k_max) / scale) if val is not None and len(val) else None
    n_classes = len(train.dataset.classes)
    fits = []
    for full in converged:
        best = None
        clf = LogisticRegression(max_iter=5000 if full else 500, tol=1e-6 if full else 1e-4, random_state=seed,
                                 warm_start=True)  # each C starts from the last fit
        for c in grid if xv is not None else (1.0,):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter bounds the time
                clf.set_params(C=c).fit(x, y)
            score = matthews_corrcoef(val.dataset.labels, clf.predict(xv)) if xv is not None else float("nan")
            if best is None or score > best[0]:
                best = (score, c, clf.coef_ / scale, clf.intercept_.copy())
        score, c, w, b = best
        if w.shape[0] == 1:  # two classes: one logit difference, split between the two logits
            w, b = np.concatenate([-w / 2, w / 2]), np.concatenate([-b / 2, b / 2])
        weight = torch.zeros((n_classes, w.shape[1]), dtype=torch.float32)
        bias = torch.zeros(n_classes, dtype=torch.float32)
        weight[clf.classes_] = torch.as_tensor(w, dtype=torch.float32)
        bias[clf.classes_] = torch.as_tensor(b, dtype=torch.float32)
        fits.append({"C": c, "val_mcc": score, "weight": weight, "bias": bias})
    return fits


def class_weights(labels: np.ndarray, n_classes: int) -> torch.Tensor:
    """Inverse-frequency weights, mean 1 over the classes present."""
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    w = np.where(counts > 0, counts.sum() / np.maximum(counts, 1) / n_classes, 0.0)
    return torch.tensor(w / w[counts > 0].mean(), dtype=torch.float32)


def _one_source(inputs: DataSpec, *, val: bool = False) -> tuple[str | None, str | None]:
    """(fasta, csv) of a labelled set; exactly one must be given."""
    fasta, csv = (inputs.val_fasta, inputs.val_csv) if val else (inputs.fasta, inputs.csv)
    if len(fasta) > 1:
        raise InputError(None, f"a sequence classifier takes one {'--val-fasta' if val else '--fasta'}")
    return (fasta[0] if fasta else None), csv


N_RICH = 0.1  # a predicted sequence with more N than this share is flagged
OUTLIER_SHARE = 0.05  # long sequences fewer than this share of a set whose median is short: outliers, not a recipe


def check_length_outliers(path, lengths: np.ndarray, where: np.ndarray) -> None:
    """An InputError naming the longest sequence of a set whose median is short (LONG_SEQUENCE_BP or less) but
    which holds a few long ones (under OUTLIER_SHARE of it): they alone would switch the whole set to the
    long-sequence recipe."""
    long = np.flatnonzero(lengths > LONG_SEQUENCE_BP)
    if not len(long) or np.median(lengths) > LONG_SEQUENCE_BP or len(long) >= OUTLIER_SHARE * len(lengths):
        return
    i = int(long[np.argmax(lengths[long])])
    place = describe_where(path, int(where[i]))
    raise InputError(path, f"{place}: {int(lengths[i]):,} bp, where the median is {int(np.median(lengths)):,} "
                           f"bp and {len(lengths) - len(long):,} of {len(lengths):,} sequences are "
                           f"{LONG_SEQUENCE_BP:,} bp or shorter: {len(long)} such outlier(s) would switch the whole "
                           "set to the long-sequence recipe; remove them, or train them as a set of their own")


class SequenceTask(Task):
    name = "sequence"
    threshold_metric = "MCC"
    shift_averaging = True

    @classmethod
    def default_views(cls, cfg: TrainConfig) -> tuple[bool, int]:
        """A classifier trained with reverse complements (rc_prob > 0: small, base) is scored over both strands and
        its training's shifts (max_shift_bp), 8 views with the presets (better test MCC on the GUE promoter tasks,
        docs/benchmarks.md); otherwise over the input as given."""
        if cfg.rc_prob > 0:
            return True, cfg.max_shift_bp
        return False, 0

    @classmethod
    def longest_input_bp(cls, spec: DataSpec) -> int | None:
        """The longest sequence of the training and validation files (None: not readable, which the readers then
        report)."""
        paths = [p for p in (spec.csv, spec.val_csv, *spec.fasta, *spec.val_fasta) if p]
        profiles = [(p, *sequence_lengths(p)) for p in paths]
        for path, lengths, where in profiles:
            check_length_outliers(path, lengths, where)
        return max((int(lengths.max()) for _, lengths, _ in profiles if len(lengths)), default=None)

    def __init__(self, cfg: TrainConfig, state: dict | None = None):
        super().__init__(cfg, state)
        self.classes: list[str] = list((state or {}).get("classes", []))
        self.max_train_bp: int | None = (state or {}).get("max_train_bp")  # the longest training sequence
        self.min_train_bp: int | None = (state or {}).get("min_train_bp")  # the shortest (runs from before: None)

    def state(self) -> dict:
        return {"classes": self.classes, "max_train_bp": self.max_train_bp, "min_train_bp": self.min_train_bp}

    def head(self) -> dict:
        return {"n_classes": len(self.classes), "track_channels": 0}

    def longest_tokens(self) -> int:
        return int(max(d.lengths.max() for d in (self.train, self.val_set) if d is not None and len(d)))

    def largest_batch(self) -> tuple[int, str]:
        return self.train.largest_batch(self.cfg.batch_size, self.cfg.max_tokens, "training")

    # -- training ----------------------------------------------------------------------------------------------
    def _data(self, fasta: str | None, csv: str | None, labels: str | None, *, classes=None,
              min_classes: int = 2) -> SequenceData:
        dataset = load_labelled(csv or fasta, labels=labels, classes=classes, min_classes=min_classes)
        return self._fits(SequenceData(dataset, k=self.cfg.k, stride=self.cfg.stride))

    def _fits(self, data: SequenceData) -> SequenceData:
        """``data``, or an InputError naming the first sequence longer than a length-limited mixer takes (its
        model.max_len, or when training sets that, LENGTH_LIMITED_MAX_TOKENS)."""
        model = self.cfg.model
        limit = model.max_len or LENGTH_LIMITED_MAX_TOKENS
        if model.mixer in LENGTH_LIMITED_MIXERS and len(data) and data.lengths.max() > limit:
            i = int(np.argmax(data.lengths > limit))
            n = int(data.lengths[i])
            if model.max_len and n <= LENGTH_LIMITED_MAX_TOKENS:
                fix = f"train with --set model.max_len={n}"
            else:
                fix = (f"the {model.mixer} mixer takes at most {LENGTH_LIMITED_MAX_TOKENS:,} tokens: train with a "
                       f"linear-time mixer (--set mixer=linear, or hybrid, favor)")
            what = f"model.max_len ({model.max_len:,})" if model.max_len else f"limit ({limit:,})"
            raise InputError(data.dataset.source, f"sequence {data.dataset.ids[i]!r} has {n:,} tokens, more than the "
                                                  f"{model.mixer} mixer's {what}; {fix}")
        return data

    def load_training(self, spec: DataSpec) -> None:
        cfg = self.cfg
        self.train = self._data(*_one_source(spec), spec.labels)
        dataset = self.train.dataset
        self.classes = dataset.classes
        self.max_train_bp = int(self.train.bases.max())
        self.min_train_bp = int(self.train.bases.min())
        val_fasta, val_csv = _one_source(spec, val=True)
        self.val_set = None
        if val_fasta or val_csv:
            self.val_set = self._data(val_fasta, val_csv, spec.val_labels, classes=self.classes, min_classes=1)
            present = sorted({self.classes[i] for i in self.val_set.dataset.labels.tolist()})
            if len(present) < 2:
                raise InputError(self.val_set.dataset.source, f"only one class ({present[0]!r}) in the validation "
                                                              "set: its scores (MCC, AUROC) need two, so it could "
                                                              "choose no weights and no threshold; give a validation "
                                                              "set with both classes")
        else:
            log.warning("no validation set (--val-csv or --val-fasta): the last weights are kept, unchecked, and "
                        "predict uses the decision threshold 0.5")
        self._loss_weight = class_weights(dataset.labels, len(self.classes)) if cfg.class_weighting else None
        log.info("training set: %d sequences %s; validation: %d", len(dataset), dataset.class_counts(),
                 len(self.val_set) if self.val_set else 0)

    def init_model(self, model) -> bool:
        """With ``model.kmer_logits``: fit the k-mer logistic regression first (scikit-learn, on the training
        sequences, with their reverse complements when training augments with them; C chosen on validation MCC),
        start the model's k-mer term from it and its classifier at zero: the untrained model is that regression,
        validated before the first step, so early stopping keeps it unless training beats it on validation."""
        if model.kmer_linear is None:
            return False
        validated = self.val_set is not None and len(self.val_set) > 0
        start, *fallback = kmer_regression(self.train, self.val_set, self.cfg.model.kmer_logits, self.cfg.seed,
                                           reverse_complements=self.cfg.rc_prob > 0,
                                           converged=(False, True) if validated else (False,))
        with torch.no_grad():
            model.kmer_linear.weight.copy_(start["weight"])
            model.kmer_linear.bias.copy_(start["bias"])
            model.classifier.weight.zero_()
            model.classifier.bias.zero_()
        if validated:
            log.info("k-mer logistic regression (k = 1..%d, C = %g): validation MCC %.4f; the model starts from it",
                     self.cfg.model.kmer_logits, start["C"], start["val_mcc"])
        else:
            log.info("k-mer logistic regression (k = 1..%d, C = %g, no validation set to score it): the model "
                     "starts from it", self.cfg.model.kmer_logits, start["C"])
        if fallback:
            (fit,) = fallback
            self.start_alternative = {"kmer_linear.weight": fit["weight"], "kmer_linear.bias": fit["bias"]}
            log.info("the same fitted to convergence (C = %g): validation MCC %.4f; the better of the two is kept "
                     "unless training beats it", fit["C"], fit["val_mcc"])
        return True

    def epoch_batches(self, rng: np.random.Generator, n_batches: int | None = None) -> list[list[int]]:
        return self.train.batches(self.cfg.batch_size, self.cfg.max_tokens, rng)  # one pass over the data

    def collate_reads_progress(self) -> bool:
        return self.cfg.crop_min_bp > 0 and self.cfg.crop_growth > 0  # crops grow with the schedule

    def varied_shapes(self) -> bool:
        return self.cfg.crop_min_bp > 0  # widths drawn per batch (measured there; other sets keep cuDNN)

    def collate(self, items: list[int], rng: np.random.Generator | None, progress: float = 1.0) -> Batch:
        cfg = self.cfg
        crop = None
        if cfg.crop_min_bp > 0:
            crop = (cfg.crop_min_bp, min(1.0, progress / cfg.crop_growth) if cfg.crop_growth > 0 else 1.0)
        return self.train.collate(items, rng, rc_prob=cfg.rc_prob, max_shift=cfg.max_shift_bp,
                                  mutate_prob=cfg.mutate_prob, crop=crop)

    def loss(self, out, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(out.logits.float(), batch.labels, weight=self.weight_on(batch.labels.device),
                               label_smoothing=self.cfg.label_smoothing)

    # -- scoring -----------------------------------------------------------------------------------------------
    def probabilities(self, out) -> torch.Tensor:
        """(B, C) class probabilities."""
        return torch.softmax(out.logits.float(), dim=-1)

    def load_evaluation(self, inputs: DataSpec, *, held_out: bool = False) -> SequenceData:
        fasta, csv = _one_source(inputs)
        if bool(fasta) == bool(csv) or inputs.tss:
            raise InputError(None, "a sequence classifier is evaluated on --csv or --fasta (with --labels)")
        return self._data(fasta, csv, inputs.labels, classes=self.classes, min_classes=1)

    def evaluate(self, predictor, eval_set: SequenceData, *, rc_average: bool = False, threshold: float | None = None,
                 min_distance_bp: int = 100, calls_per_mbp: float | None = None, progress: bool | None = None
                 ) -> tuple[dict, tuple]:
        """Classification metrics (decisions by argmax, or for two classes at ``threshold``; "score" = MCC; for two
        classes "best_threshold", the max-MCC threshold on these data) and (labels (n,), probabilities (n, C))."""
        y, p = eval_set.dataset.labels, predictor.sequence_probs(eval_set, rc_average=rc_average)
        metrics = classification_metrics(y, p, self.classes, threshold)
        metrics["score"] = metrics["mcc"]
        # the standard error of a correlation coefficient (MCC is one for two classes), (1 - r^2) / sqrt(n - 1):
        # how much the score moves with the sample (0.079 at MCC 0.47 on 98 sequences, 0.012 on 6,000)
        metrics["score_se"] = float((1 - metrics["mcc"] ** 2) / np.sqrt(max(len(y) - 1, 1)))
        if len(self.classes) == 2:
            metrics["best_threshold"] = max_mcc_threshold(y == 1, p[:, 1])
        return metrics, (y, p)

    # -- reports -----------------------------------------------------------------------------------------------
    def curves(self, scored: tuple) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        y, p = scored
        return {f"{self.classes[1]!r} against {self.classes[0]!r}": (y == 1, p[:, 1])} if len(self.classes) == 2 \
            else {}

    def report_lines(self, metrics: dict) -> list[str]:
        lines = ["| metric | value |", "|---|---:|"]
        for key in ("n", "accuracy", "auroc", "auprc", "mcc", "f1"):
            if key in metrics:
                value = metrics[key]
                lines.append(f"| {key} | {value:,} |" if isinstance(value, int) else f"| {key} | {value:.4f} |")
        lines += ["", "Confusion matrix (rows: true class, columns: predicted):", "",
                  "| | " + " | ".join(self.classes) + " |", "|---|" + "---:|" * len(self.classes)]
        for name, row in zip(self.classes, metrics["confusion_matrix"], strict=True):
            lines.append(f"| {name} | " + " | ".join(str(v) for v in row) + " |")
        return lines

    def summary(self, metrics: dict) -> str:
        return ", ".join(f"{k} {metrics[k]:.4f}" for k in ("accuracy", "mcc", "f1", "auroc", "auprc") if k in metrics)

    def describe(self, inputs: DataSpec, held_out: bool = False) -> str:
        return f"genolin evaluation: {inputs.csv or inputs.fasta[0]}"

    # -- outputs -----------------------------------------------------------------------------------------------
    def unseen_inputs(self, dataset: LabelledSet, source: str) -> list[str]:
        """Per sequence, what makes it unlike the training set ("" when nothing): "short" (under a quarter of the
        shortest training sequence), "long" (over 4 times the longest), "n_rich" (over N_RICH of its bases N); a
        warning for each kind that occurs. The model scores such inputs with confidence all the same."""
        lengths = np.array([len(s) for s in dataset.seqs], dtype=np.int64)
        n_share = np.array([s.count(b"N") / max(1, len(s)) for s in dataset.seqs])
        kinds = {"short": lengths < (self.min_train_bp or 0) / 4,
                 "long": lengths > 4 * self.max_train_bp if self.max_train_bp else np.zeros(len(lengths), bool),
                 "n_rich": n_share > N_RICH}
        said = {"short": f"under a quarter of the shortest training sequence ({self.min_train_bp or 0:,} bp)",
                "long": f"over 4 times the longest training sequence ({self.max_train_bp or 0:,} bp; the longest "
                        f"here {int(lengths.max(initial=0)):,} bp; a classifier scores each whole sequence once; for "
                        "genomes train a track model, --tss)",
                "n_rich": f"over {N_RICH:.0%} N"}
        for kind, hit in kinds.items():
            if hit.any():
                log.warning("%s: %d sequence(s) %s, e.g. %r: their scores are guesses (the 'note' column says "
                            "which)", source, int(hit.sum()), said[kind], dataset.ids[int(np.argmax(hit))])
        return [",".join(k for k, hit in kinds.items() if hit[i]) for i in range(len(lengths))]

    def predict(self, predictor, inputs: DataSpec, out: str | os.PathLike, options: PredictOptions) -> str:
        """The TSV of ``genolin predict`` for the sequences of ``inputs`` (one FASTA or one CSV/TSV)."""
        from genolin.io.atomic import output_text
        from genolin.io.labelled import read_sequences

        fasta, csv = _one_source(inputs)
        if bool(fasta) == bool(csv):
            raise InputError(None, "give the sequences as --fasta or as --csv")
        if not predictor.writes:  # torchrun: rank 0 scores every sequence (they are short)
            return "rank 0 predicts"
        dataset = read_sequences(csv or fasta)
        notes = self.unseen_inputs(dataset, str(csv or fasta))
        data = self._fits(SequenceData(dataset, k=self.cfg.k, stride=self.cfg.stride))
        probs = predictor.sequence_probs(data, rc_average=options.rc_average)
        with output_text(out) as fh:
            fh.write("\t".join(["id", "length"] + [f"prob_{c}" for c in self.classes] + ["pred", "has_n", "note"])
                     + "\n")
            for name, seq, p, note in zip(dataset.ids, dataset.seqs, probs, notes, strict=True):
                pred = int(p[1] >= options.threshold) if len(self.classes) == 2 else int(p.argmax())
                # 6 significant digits: a probability of 1e-8 stays 1e-08 (not 0.000000), so log-odds can be taken
                fh.write("\t".join([name, str(len(seq))] + [f"{x:.6g}" for x in p]
                                   + [self.classes[pred], "true" if b"N" in seq else "false", note or "-"]) + "\n")
        return f"{len(dataset)} sequences -> {out}"
