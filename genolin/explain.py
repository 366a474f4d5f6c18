"""``genolin explain``: which bases drive a prediction.

    explain(run, inputs, out_dir, options) -> a one-line summary
    ism_sequences(run, seqs, target, rc_average) -> [(L, 4) float32], reference log-odds (n,)
    ism_regions(run, genome, regions, bin_offset) -> [(L, 4) float32], reference log-odds (n,)
    gradient_attributions(run, seqs or region sequences, method, ...) -> [(L, 4) float32]

What is explained is a log-odds score:
- sequence classifier: log p(target) - log(1 - p(target)) (two classes: log p(positive) - log p(negative); the
  target defaults to the second class, the one ``genolin predict``'s threshold applies to), with ``rc_average``
  of the strand-averaged probabilities, exactly as ``genolin predict --rc-average --shift-average 0`` computes
  them (no shift views: a shift would move the bases under the attributions);
- track model: the prior-corrected log-odds of one bin (``bin_offset`` bins from the bin of the region's centre
  base) on the region's strand (BED column 6; "." counts as +). The model sees the region inside its genome
  context, ``context_bp`` bases either side (default: enough for one training window, ``window_bp``, centred on
  the region, as predict's windows see it; 0: the region's bases alone), clipped to its contig, or on a circular
  contig (FASTA header, --circular, or read as one in training) running on across the origin; only the region's
  bases are mutated and attributed. A region narrower than 2 x ``flank_bp`` + 1 (predict's peaks.bed calls are one
  bin wide) is widened to its centre base +- ``flank_bp`` (clipped to its contig), as the workflow's explain does;
  the centre stays the explained one.

Methods, every one an (L, 4) float32 array per sequence, columns A, C, G, T:
- ``ism``: in-silico saturation mutagenesis, exact: entry (i, b) is the score of the sequence with base i replaced
  by b minus the score of the sequence itself (0 at the reference base; at an N every base is a substitution).
  Mutants are re-tokenized like any input (k-mers, stride), so a k-mer model's answer is the one predict gives.
- ``saliency``: the gradient of the score with respect to one-hot bases (captum ``Saliency``), centred over the
  four bases at each position (the component off the one-hot simplex removed).
- ``deepliftshap``: DeepLIFT/SHAP (tangermeme ``deep_lift_shap``) against dinucleotide-shuffled references,
  hypothetical contributions (what each base would contribute at that position). The encoder's functional
  nonlinearities (elu, gelu, silu, norms, the k-mer products) have no DeepLIFT rule, so tangermeme treats them as
  linear: the attributions do not sum to the output differences (on the tests' planted-motif model the deltas
  were several times the differences; logged as a warning) and are, in effect, averaged gradient x (input -
  reference) over the references, as in expected gradients. They still find the planted motif (tests).
Gradients need the model as a function of one-hot bases X (B, 4, L): the token of the k-mer at bases
i..i+k-1 gets the embedding sum_m P_m E[m] + (1 - sum_m P_m) E[UNK], where P_m is the product of X's entries for
the bases of k-mer m. At one-hot inputs that is exactly the token's embedding (an N, all zeros, gives [UNK]); in
between it is multilinear, so gradients see every base of every k-mer it is in. The bag-of-k-mers term of
``kmer_logits`` models is computed from the same products.

Cost: every model input is counted before any is scored (ism: each sequence and its substitutions, 3 per base, 4
at an N; saliency: one gradient per sequence; deepliftshap: one per shuffled reference); more than
``ExplainOptions.max_inputs`` (--max-inputs) is refused. Progress advances in model inputs, and a log line gives
the count and, at the pace of the first batch of inputs, the time in all (``Pace``).

Outputs in DIR: ``<method>.npz`` (one array per sequence id), ``scores.tsv`` (id, length, reference log-odds,
largest importance), ``logos/<rank>_<id>.png`` (logomaker) for the sequences with the highest scores, and for
genome regions ``<method>.bw``: per base, the importance of the reference base (ism: minus the mean of its three
substitution effects, i.e. how much the score drops when it mutates; gradients: the reference base's value).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from genolin.errors import InputError
from genolin.tokenize import N_SPECIAL, UNK, base_codes, kmer_ids, n_tokens

log = logging.getLogger(__name__)

METHODS = ("ism", "saliency", "deepliftshap")
BASES = b"ACGT"
# model inputs explain takes on without --max-inputs: ISM of every call of E. coli's peaks.bed at the bacteria
# model's density (about 2,800 calls of 201 bp in 8-kb windows: 1.7 M inputs) fits; a whole 4.6-Mbp contig (14 M
# inputs of 4.6 Mbp) does not
MAX_INPUTS = 2_000_000


@dataclass
class ExplainOptions:
    method: str = "ism"
    target: str | None = None  # sequence classifier: the class explained (default: the second of two)
    rc_average: bool = False  # sequence classifier: explain the strand-averaged probability
    bin_offset: int = 0  # track model: bins from the centre base's bin
    flank_bp: int = 100  # track model: regions narrower than 2 * flank_bp + 1 are widened to centre +- flank_bp
    context_bp: int | None = None  # track model: unmutated bases either side (None: a training window in all)
    top: int = 5  # logos for this many top-scoring sequences
    motifs: bool = False  # TF-MoDISco on the attributions, motifs matched to known promoter elements
    domain: str = "any"  # motifs: matched only to the elements of this domain (genolin.motifs.DOMAINS)
    shuffles: int = 20  # deepliftshap: dinucleotide-shuffled references per sequence
    seed: int = 0
    max_inputs: int = MAX_INPUTS  # refuse work of more model inputs than this (``Pace``)


def one_hot(seq: bytes) -> np.ndarray:
    """ACGT bytes (any case; others are N) -> (L, 4) float32, rows of zeros at N."""
    codes = base_codes(seq)
    out = np.zeros((len(seq), 5), dtype=np.float32)
    out[np.arange(len(seq)), codes] = 1.0
    return out[:, :4]


def target_index(classes: list[str], target: str | None) -> int:
    if target is None:
        if len(classes) != 2:
            raise InputError("--target", f"the model has {len(classes)} classes ({', '.join(classes)}); name the "
                                         "one to explain")
        return 1
    if target not in classes:
        raise InputError("--target", f"class {target!r} is not one of the model's classes ({', '.join(classes)})")
    return classes.index(target)


def class_log_odds(log_probs: np.ndarray, t: int) -> np.ndarray:
    """(n, C) log probabilities -> (n,) log p_t - log(1 - p_t), from the other classes' log-probabilities."""
    others = np.delete(log_probs, t, axis=1)
    return log_probs[:, t] - np.logaddexp.reduce(others, axis=1)


def substitutions(seq: bytes, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """(M, 2) every single-base substitution of ``seq`` at positions lo..hi-1 (default: all) as (position, base
    index), by position then base: 3 per base, 4 at an N."""
    hi = len(seq) if hi is None else hi
    pos, base = np.nonzero(base_codes(seq[lo:hi])[:, None] != np.arange(4)[None, :])
    return np.stack([pos + lo, base], 1).astype(np.int64).reshape(-1, 2)


def substituted(seq: bytes, i: int, b: int) -> bytes:
    return seq[:i] + BASES[b:b + 1] + seq[i + 1:]


def mutants(seq: bytes, lo: int = 0, hi: int | None = None) -> tuple[list[bytes], np.ndarray]:
    """Every single-base substitution of ``seq`` at positions lo..hi-1 (default: all): (the mutant sequences,
    (M, 2) their (position - lo, base index))."""
    where = substitutions(seq, lo, hi)
    return [substituted(seq, i, b) for i, b in where.tolist()], where - np.array([lo, 0])


def ism_inputs(seq: bytes, lo: int = 0, hi: int | None = None) -> int:
    """Model inputs of the ISM of ``seq``'s bases lo..hi-1: the sequence itself and each of its substitutions."""
    hi = len(seq) if hi is None else hi
    return 1 + 4 * (hi - lo) - int(np.count_nonzero(base_codes(seq[lo:hi]) < 4))


def _scatter(effects: np.ndarray, where: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros((length, 4), dtype=np.float32)
    out[where[:, 0], where[:, 1]] = effects
    return out


# -- sequence classifiers ---------------------------------------------------------------------------------------
def sequence_scores(run, seqs: list[bytes], t: int, rc_average: bool) -> np.ndarray:
    """(n,) float64 log-odds of class ``t`` for each sequence, through the predictor (as ``genolin predict``)."""
    from genolin.io.labelled import LabelledSet
    from genolin.tasks import SequenceData

    data = SequenceData(LabelledSet(ids=[str(i) for i in range(len(seqs))], seqs=seqs,
                                    labels=np.zeros(len(seqs), np.int64), classes=["?"]),
                        k=run.config.train.k, stride=run.config.train.stride)
    return class_log_odds(run.predictor.sequence_log_probs(data, rc_average=rc_average), t)


def _ism(seqs: list[bytes], score, batch: int, progress=None,
         spans: list[tuple[int, int]] | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Saturation mutagenesis: ``score(n, sequences)`` gives the (m,) log-odds of equal-length variants of sequence
    n; returns ([(L, 4) mutant minus reference], (n,) reference log-odds), L the length of sequence n's span (lo,
    hi) of mutated bases (default: all of it). The variants are made ``batch`` at a time (a long sequence's would
    not fit in memory at once); ``progress`` advances by each batch's inputs."""
    out, refs = [], np.zeros(len(seqs))
    for n, seq in enumerate(seqs):
        lo, hi = spans[n] if spans is not None else (0, len(seq))
        where = substitutions(seq, lo, hi)
        todo = [None, *where.tolist()]  # the reference, then each (position, base)
        scores = []
        for chunk in _chunks(todo, batch):
            scores.append(score(n, [seq if m is None else substituted(seq, *m) for m in chunk]))
            if progress is not None:
                progress.update(len(chunk))
        scores = np.concatenate(scores)
        refs[n] = scores[0]
        out.append(_scatter(scores[1:] - scores[0], where - np.array([lo, 0]), hi - lo))
    return out, refs


def ism_sequences(run, seqs: list[bytes], t: int, rc_average: bool = False, batch: int = 4096,
                  progress=None) -> tuple[list[np.ndarray], np.ndarray]:
    """Saturation mutagenesis of each sequence: ([(L, 4) effects], (n,) reference log-odds)."""
    return _ism(seqs, lambda n, chunk: sequence_scores(run, chunk, t, rc_average), batch, progress)


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


# -- track models -----------------------------------------------------------------------------------------------
@dataclass
class Region:
    name: str
    chrom: str
    start: int
    end: int
    strand: str
    seq: bytes
    centre: int | None = None  # the index in seq of the base whose bin is explained; None: len(seq) // 2
    window: bytes | None = None  # the bases the model sees: seq with its genome context (None: seq alone)
    before: int = 0  # where seq starts in window

    @property
    def model_seq(self) -> bytes:
        return self.seq if self.window is None else self.window

    @property
    def model_centre(self) -> int:
        """The explained base's index in ``model_seq``."""
        return self.before + (len(self.seq) // 2 if self.centre is None else self.centre)

    @property
    def channel(self) -> int:
        """The track channel of the region's strand: 0 for + (and "."), 1 for -."""
        return 1 if self.strand == "-" else 0


def region_bin(run, length: int, offset: int, where: str, centre: int | None = None) -> int:
    """The token (bin) index of the region's centre base (``centre``, else length // 2) plus ``offset`` bins;
    InputError when outside."""
    k, stride = run.config.train.k, run.config.train.stride
    n = n_tokens(length, k, stride)
    b = (length // 2 if centre is None else centre) // stride + offset
    if not 0 <= b < n:
        raise InputError(where, f"bin {offset:+d} from the centre is outside the region's {n} bins (k = {k}, "
                                f"stride {stride})")
    return b


def track_scores(run, seqs: list[bytes], b: int, channel: int) -> np.ndarray:
    """(n,) float64 log-odds of bin ``b`` on strand ``channel`` (0: +, 1: -) for equal-length sequences."""
    from genolin.tasks import pad_tokens

    k, stride = run.config.train.k, run.config.train.stride
    ids, mask = pad_tokens([kmer_ids(s, k, stride) for s in seqs])
    out = run.predictor.outputs(ids, mask)
    return run.task.log_odds(out)[:, b, channel].double().cpu().numpy()


def region_bins(run, regions: list[Region], offset: int) -> list[int]:
    """The scored bin of each region, in the bins of the bases the model sees."""
    return [region_bin(run, len(r.model_seq), offset, r.name, r.model_centre) for r in regions]


def ism_regions(run, regions: list[Region], offset: int, batch: int = 1024, progress=None):
    """Saturation mutagenesis of each region's bases (its context unmutated) on its scored bin: ([(L, 4)
    effects], (n,) reference log-odds). Mutants go to the model ``batch`` at a time, fewer where their tokens
    would pass the run's ``max_tokens`` (a training window of context is thousands of tokens)."""
    bins = region_bins(run, regions, offset)
    k, stride = run.config.train.k, run.config.train.stride
    tokens = max(n_tokens(len(r.model_seq), k, stride) for r in regions)
    batch = max(1, min(batch, run.config.train.max_tokens // max(tokens, 1)))
    return _ism([r.model_seq for r in regions],
                lambda n, chunk: track_scores(run, chunk, bins[n], regions[n].channel), batch, progress,
                spans=[(r.before, r.before + len(r.seq)) for r in regions])


# -- the model as a function of one-hot bases (gradient methods) ----------------------------------------------
def kmer_products(x: torch.Tensor, k: int, stride: int) -> torch.Tensor:
    """x (B, L, 4) -> (B, N, 4^k): for each token (bases i*stride .. +k-1) the products of its bases' entries
    for every k-mer, first base most significant (the tokenizer's order); N = n_tokens(L, k, stride)."""
    windows = x.unfold(1, k, stride)  # (B, N, 4, k)
    p = windows[..., 0]
    for j in range(1, k):
        p = (p.unsqueeze(-1) * windows[..., j].unsqueeze(-2)).flatten(-2)
    return p


def kmer_profile_onehot(x: torch.Tensor, k_max: int) -> torch.Tensor:
    """x (B, L, 4) -> (B, 4 + ... + 4^k_max): ``genolin.model.kmer_profile`` of the bases, from products (equal
    to it at one-hot inputs)."""
    parts = []
    real = x.sum(-1)  # (B, L): 1 at a base, 0 at N
    for k in range(1, k_max + 1):
        if x.shape[1] < k:
            parts.append(x.new_zeros(x.shape[0], 4**k))
            continue
        counts = kmer_products(x, k, 1).sum(1)
        ok = real.unfold(1, k, 1).prod(-1).sum(1, keepdim=True)
        parts.append(counts * 2.0**k / ok.clamp_min(1.0))
    return torch.cat(parts, 1)


class BasesToScore(nn.Module):
    """One-hot bases (B, 4, L) -> (B, 1) the explained score (the layout tangermeme and captum expect).

    ``score``: "class" (log-odds of class ``t``; no RC averaging) or "bin" (log-odds of bin ``t`` on strand
    ``channel``)."""

    def __init__(self, run, score: str, t: int, channel: int = 0):
        super().__init__()
        self.model, self.task = run.model, run.task
        self.k, self.stride = run.config.train.k, run.config.train.stride
        self.score, self.t, self.channel = score, t, channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.model.cfg
        table = self.model.embed.weight  # (V, d)
        bases = x.transpose(1, 2).to(table.dtype)  # (B, L, 4)
        p = kmer_products(bases, self.k, self.stride)  # (B, N, 4^k)
        emb = p @ table[N_SPECIAL:N_SPECIAL + 4**self.k] + (1 - p.sum(-1, keepdim=True)) * table[UNK]
        ids = torch.full(emb.shape[:2], UNK, dtype=torch.long, device=emb.device)  # real tokens (no padding)
        mask = torch.ones(emb.shape[:2], dtype=torch.bool, device=emb.device)
        profile = kmer_profile_onehot(bases, cfg.kmer_logits) if self.model.kmer_linear is not None else None
        out = self.model(ids, mask, stream=False, x=emb, profile=profile)
        if self.score == "class":
            lp = torch.log_softmax(out.logits, -1)
            others = torch.cat([lp[:, :self.t], lp[:, self.t + 1:]], 1)
            return (lp[:, self.t] - torch.logsumexp(others, 1)).unsqueeze(1)
        return self.task.log_odds(out)[:, self.t, self.channel].unsqueeze(1)


def gradient_attributions(run, seqs: list[bytes], method: str, score: str, t: int, channel: int = 0,
                          options: ExplainOptions | None = None, progress=None) -> list[np.ndarray]:
    """Saliency or DeepLIFT/SHAP of ``BasesToScore`` for each sequence: [(L, 4) float32]. ``t`` per sequence
    for bins (a list), an int for classes."""
    options = options or ExplainOptions()
    device = next(run.model.parameters()).device
    out, warned = [], False
    for n, seq in enumerate(seqs):
        tt = t[n] if isinstance(t, list) else t
        wrapper = BasesToScore(run, score, tt, channel[n] if isinstance(channel, list) else channel).to(device)
        x = torch.from_numpy(one_hot(seq).T.copy()).unsqueeze(0).to(device)  # (1, 4, L)
        if method == "saliency":
            from captum.attr import Saliency

            g = Saliency(wrapper).attribute(x.requires_grad_(), target=0, abs=False)[0].T  # (L, 4)
            a = g - g.mean(1, keepdim=True)
        else:
            from tangermeme.deep_lift_shap import deep_lift_shap

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                a = deep_lift_shap(wrapper, x.float(), target=0, n_shuffles=options.shuffles, hypothetical=True,
                                   random_state=options.seed + n, device=str(device), batch_size=options.shuffles,
                                   verbose=False, warning_threshold=0.01)[0].T
            if caught and not warned:  # tangermeme's check that attributions sum to the output differences
                log.warning("deepliftshap: %s (the encoder's elu/gelu/silu, norms and k-mer products have no "
                            "DeepLIFT rule: the values are averaged gradient x (input - reference), as in "
                            "expected gradients, not exact DeepLIFT)", str(caught[0].message).split(":")[0])
                warned = True
        out.append(a.detach().float().cpu().numpy())
        if progress is not None:
            progress.update(gradient_inputs(method, options))
    return out


def gradient_inputs(method: str, options: ExplainOptions) -> int:
    """Model inputs (forward and backward) of one sequence's gradient attributions: saliency one, deepliftshap
    one per shuffled reference."""
    return 1 if method == "saliency" else options.shuffles


# -- outputs ----------------------------------------------------------------------------------------------------
def importance(attr: np.ndarray, seq: bytes, method: str) -> np.ndarray:
    """(L,) per-base importance of the reference base: ism: minus the mean of its substitution effects; gradient
    methods: the reference base's value (0 at N)."""
    oh = one_hot(seq)
    if method == "ism":
        return -attr.sum(1) / np.maximum(4 - oh.sum(1), 1)  # substitutions per base: 3 (4 at N)
    return (attr * oh).sum(1)


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80] or "seq"


def write_logo(path: Path, attr: np.ndarray, seq: bytes, method: str, title: str) -> None:
    """A PNG sequence logo (logomaker): each reference base drawn with its importance as height."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    values = one_hot(seq) * importance(attr, seq, method)[:, None]
    frame = pd.DataFrame(values, columns=list("ACGT"))
    fig, ax = plt.subplots(figsize=(max(6.0, min(40.0, len(seq) / 8)), 2.2))
    logomaker.Logo(frame, ax=ax, color_scheme="classic")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("position (bp)")
    ax.set_ylabel({"ism": "-mean ISM effect", "saliency": "gradient", "deepliftshap": "DeepLIFT/SHAP"}[method])
    fig.tight_layout()
    from genolin.io.atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_bigwig(path: Path, lengths: dict[str, int], regions: list[Region], values: list[np.ndarray]) -> None:
    """Per-base values of the regions (sorted; where regions overlap, the first one's bases are kept)."""
    import pyBigWig

    from genolin.io.atomic import atomic_path

    rank = {c: i for i, c in enumerate(lengths)}
    order = sorted(range(len(regions)), key=lambda i: (rank[regions[i].chrom], regions[i].start))
    with atomic_path(path) as tmp:
        bw = pyBigWig.open(str(tmp), "w")
        try:
            bw.addHeader([(c, int(n)) for c, n in lengths.items() if n > 0])
            done: dict[str, int] = {}
            for i in order:
                r, v = regions[i], values[i]
                start = max(r.start, done.get(r.chrom, 0))
                if start < r.end:
                    bw.addEntries(r.chrom, start, values=v[start - r.start:].astype(np.float64).tolist(),
                                  span=1, step=1)
                    done[r.chrom] = r.end
        finally:
            bw.close()


def explain(run, inputs, out_dir: str | os.PathLike, options: ExplainOptions, regions_bed: str | None = None) -> str:
    """Attributions of ``run`` for the sequences of ``inputs`` (sequence model: --fasta or --csv; track model:
    --fasta GENOME with ``regions_bed``) into ``out_dir``; returns what was written."""
    from genolin.progress import progress_bar

    if options.method not in METHODS:
        raise InputError("--method", f"unknown method {options.method!r}; choose from {', '.join(METHODS)}")
    run.model.eval()
    run.predictor.amp = False  # float32 on CUDA too: bf16 rounds log-odds to ~3 digits, coarser than most effects
    if run.task.has_track:
        regions, lengths = track_inputs(run, inputs, options, regions_bed)
        ids, seqs, t = [r.name for r in regions], [r.seq for r in regions], None
    else:
        (ids, seqs, t), regions, lengths = sequence_inputs(run, inputs, options, regions_bed), [], {}
    if regions:  # the cost, before the work
        pace = Pace(options, [r.model_seq for r in regions], [(r.before, r.before + len(r.seq)) for r in regions])
    else:
        pace = Pace(options, seqs, [(0, len(s)) for s in seqs])
    with torch.inference_mode(False), progress_bar(total=pace.total, unit="inputs", desc=options.method) as bar:
        pace.bar = bar
        if run.task.has_track:
            attrs, refs = region_attributions(run, regions, options, pace)
        elif options.method == "ism":
            attrs, refs = ism_sequences(run, seqs, t, options.rc_average, progress=pace)
        else:
            if options.rc_average:
                raise InputError("--rc-average", "gradient methods explain the forward strand; use --method ism "
                                                 "for the strand-averaged score")
            refs = sequence_scores(run, seqs, t, False)
            pace.start()
            attrs = gradient_attributions(run, seqs, options.method, "class", t, 0, options, pace)
    return write_explanation(Path(out_dir), options, ids, seqs, attrs, refs, regions, lengths)


class Pace:
    """The size of the work in model inputs, checked against ``options.max_inputs`` when made (an InputError naming
    --max-inputs), and a progress bar's ``update`` in those inputs that, once the first batch is done, logs one
    line: the inputs and, at that batch's pace, the time in all. A batch is as many inputs as the model takes at
    once, so later ones keep its pace; the first also pays the model's warm-up, so the estimate errs long.

    ``seen``: the sequences the model sees (a region's with its context); ``spans``: the (lo, hi) of each one's
    mutated bases. Gradient methods also score each sequence once, forward only, before ``start``: not counted."""

    def __init__(self, options: ExplainOptions, seen: list[bytes], spans: list[tuple[int, int]]):
        self.bar = None
        longest = max(map(len, seen))
        n = f"{len(seen):,} sequence{'' if len(seen) == 1 else 's'}"
        if options.method == "ism":
            self.total = sum(ism_inputs(s, lo, hi) for s, (lo, hi) in zip(seen, spans, strict=True))
            self.what = (f"ism: {n}, {sum(hi - lo for lo, hi in spans):,} bases, 3 substitutions each (4 at an N): "
                         f"{self.total:,} model inputs of up to {longest:,} bp")
        else:
            self.total = len(seen) * gradient_inputs(options.method, options)
            each = "a gradient" if options.method == "saliency" else f"{options.shuffles} shuffled references"
            self.what = f"{options.method}: {n}, {each} each: {self.total:,} model inputs of up to {longest:,} bp"
        if self.total > options.max_inputs:
            raise InputError("--max-inputs", f"{self.what}, more than {options.max_inputs:,}: explain fewer or "
                                             "narrower regions or sequences (ISM costs 3 inputs per base, each as "
                                             "long as what the model sees), or raise --max-inputs")
        self.start()

    def start(self) -> None:
        """The clock of the first batch starts (again) here."""
        self.done, self.t0, self.said = 0, time.monotonic(), False

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        if not self.said:
            self.said = True
            spent = time.monotonic() - self.t0
            if self.done >= self.total:
                log.info("%s, in %s", self.what, _span(spent))
            else:
                log.info("%s; about %s in all at the pace of the first batch (%s inputs in %s; progress lines give "
                         "the time left)", self.what, _span(spent * self.total / self.done), f"{self.done:,}",
                         _span(spent))


def _span(seconds: float) -> str:
    return (f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min" if seconds < 7200
            else f"{seconds / 3600:.1f} h")


def track_inputs(run, inputs, options: ExplainOptions, regions_bed: str | None) -> tuple[list[Region], dict]:
    """(the regions of ``regions_bed`` in the one genome of ``inputs``, widened and with context as ``options``
    say; the genome's contig lengths), after checking the options fit a track model."""
    if not regions_bed or len(inputs.fasta) != 1 or inputs.csv:
        raise InputError(None, "a track model is explained on --fasta GENOME --regions BED")
    if options.rc_average or options.target:
        raise InputError(None, "--rc-average and --target are for sequence classifiers; a track model "
                               "explains one bin (--bin) on the region's strand")
    whole = run.config.train.window_bp if options.context_bp is None else None  # one training window
    # circular contigs (FASTA header, --circular, those the run trained on as circles): context across the origin
    circles = run.task.scoring_data(inputs.fasta[:1], [], inputs.circular).circular
    return read_regions(inputs.fasta[0], regions_bed, options.flank_bp, options.context_bp or 0, whole, circles)


def sequence_inputs(run, inputs, options: ExplainOptions, regions_bed: str | None) -> tuple[list, list, int]:
    """(ids, sequences, the explained class's index) of a sequence classifier's --fasta or --csv."""
    if regions_bed:
        raise InputError("--regions", "regions are for track models; give a sequence classifier --fasta or "
                                      "--csv sequences")
    from genolin.io.labelled import read_sequences
    from genolin.tasks.sequence import _one_source

    fasta, csv = _one_source(inputs)
    if bool(fasta) == bool(csv):
        raise InputError(None, "give the sequences as --fasta or as --csv")
    dataset = read_sequences(csv or fasta)
    k = run.config.train.k
    short = [i for i, s in enumerate(dataset.seqs) if len(s) < k]
    if short:
        raise InputError(csv or fasta, f"sequence {dataset.ids[short[0]]!r} has fewer than k = {k} bases")
    return list(dataset.ids), list(dataset.seqs), target_index(run.task.classes, options.target)


def region_attributions(run, regions: list[Region], options: ExplainOptions, pace: Pace | None = None
                        ) -> tuple[list, np.ndarray]:
    """([(L, 4) attributions], (n,) log-odds) of each region's bin: ISM, or a gradient method cut to the region;
    ``pace`` advances in model inputs."""
    if options.method == "ism":
        return ism_regions(run, regions, options.bin_offset, progress=pace)
    bins = region_bins(run, regions, options.bin_offset)
    channels = [r.channel for r in regions]
    refs = np.array([track_scores(run, [r.model_seq], b, c)[0] for r, b, c in zip(regions, bins, channels,
                                                                                      strict=True)])
    if pace is not None:
        pace.start()
    attrs = gradient_attributions(run, [r.model_seq for r in regions], options.method, "bin", bins, channels,
                                  options, pace)
    return [a[r.before:r.before + len(r.seq)] for a, r in zip(attrs, regions, strict=True)], refs


def write_explanation(out: Path, options: ExplainOptions, ids: list, seqs: list, attrs: list, refs: np.ndarray,
                      regions: list[Region], lengths: dict) -> str:
    """METHOD.npz, scores.tsv, the top logos, for regions METHOD.bw, with --motifs the motifs, into ``out``;
    returns what was written."""
    from genolin.io.atomic import atomic_open
    from genolin.io.npz import NpzWriter

    out.mkdir(parents=True, exist_ok=True)
    with NpzWriter(out / f"{options.method}.npz") as npz:
        for name, a in zip(ids, attrs, strict=True):
            npz.write(name, a.astype(np.float32))
    with atomic_open(out / "scores.tsv") as fh:
        fh.write("id\tlength\tlog_odds\tmax_importance\n")
        for name, s, r, a in zip(ids, seqs, refs, attrs, strict=True):
            fh.write(f"{name}\t{len(s)}\t{r:.6g}\t{float(np.abs(importance(a, s, options.method)).max()):.6g}\n")
    top = np.argsort(-refs, kind="stable")[: options.top]
    (out / "logos").mkdir(exist_ok=True)
    for rank, i in enumerate(top, 1):
        write_logo(out / "logos" / f"{rank}_{safe_name(ids[i])}.png", attrs[i], seqs[i], options.method,
                   f"{ids[i]}: log-odds {refs[i]:.2f} ({options.method})")
    extra = ""
    if regions:
        write_bigwig(out / f"{options.method}.bw", lengths, regions,
                     [importance(a, r.seq, options.method) for a, r in zip(attrs, regions, strict=True)])
        extra = f", {options.method}.bw"
    if options.motifs:
        extra += "; " + find_motifs(out, seqs, attrs, options.method, options.domain)
    return f"{len(seqs)} sequences -> {out}/{options.method}.npz, scores.tsv, {len(top)} logos{extra}"


def hypothetical(attr: np.ndarray, method: str) -> np.ndarray:
    """(L, 4) hypothetical contributions for TF-MoDISco: ISM effects centred over the four bases at each position
    (the reference base's entry is then minus the mean substitution effect: ``importance``); gradient methods'
    values as they are (saliency is already centred; deepliftshap's are hypothetical)."""
    return attr - attr.mean(1, keepdims=True) if method == "ism" else attr


def find_motifs(out: Path, seqs: list[bytes], attrs: list[np.ndarray], method: str, domain: str = "any") -> str:
    """TF-MoDISco on the attributions (sequences zero-padded to the longest), matched to the known elements of
    ``domain`` and written to ``out``."""
    from genolin.motifs import discover, match, write_motifs

    width = max(len(s) for s in seqs)
    onehot = np.zeros((len(seqs), width, 4), np.float32)
    hyp = np.zeros_like(onehot)
    for i, (s, a) in enumerate(zip(seqs, attrs, strict=True)):
        onehot[i, :len(s)] = one_hot(s)
        hyp[i, :len(s)] = hypothetical(a, method)
    found = match(discover(onehot, hyp), domain)
    return write_motifs(out, found)


def read_regions(genome_path: str, bed: str, flank_bp: int = 0, context_bp: int = 0,
                 window_bp: int | None = None, circles=frozenset()) -> tuple[list[Region], dict[str, int]]:
    """The BED's regions with their bases (names: BED column 4, else chrom:start-end(strand); unique), those
    narrower than 2 x ``flank_bp`` + 1 widened to their centre base +- ``flank_bp`` (clipped to the contig); each
    inside ``context_bp`` bases of genome either side (``window_bp``: instead, enough either side for that many
    bases in all), clipped to its contig, or on a contig named in ``circles`` running on across its origin (at most
    the whole circle)."""
    from genolin.io.bed import read_bed
    from genolin.io.fasta import Genome

    genome = Genome(genome_path)
    out, seen, widened = [], set(), 0
    for iv in read_bed(bed, genome.lengths):
        name = iv.name if iv.name != "." else f"{iv.chrom}:{iv.start}-{iv.end}({iv.strand})"
        if name in seen:
            name = f"{name}_{iv.chrom}:{iv.start}-{iv.end}"
        seen.add(name)
        start, end, centre = iv.start, iv.end, None
        if end - start < 2 * flank_bp + 1:
            at = start + (end - start) // 2
            start, end = max(0, at - flank_bp), min(genome.lengths[iv.chrom], at + flank_bp + 1)
            centre, widened = at - start, widened + 1
        side = max(0, (window_bp - (end - start) + 1) // 2) if window_bp is not None else context_bp
        n = genome.lengths[iv.chrom]
        if iv.chrom in circles:  # the context wraps: bases before 0 are the contig's last ones, past n its first
            side = min(side, (n - (end - start)) // 2)
            lo, hi = start - side, end + side
            window = b"".join(genome.fetch(iv.chrom, a % n, (a % n) + (b - a))
                              for a, b in _origin_cut(lo, hi, n))
        else:
            lo, hi = max(0, start - side), min(n, end + side)
            window = genome.fetch(iv.chrom, lo, hi)
        out.append(Region(name, iv.chrom, start, end, iv.strand, window[start - lo:end - lo], centre,
                          window if (lo, hi) != (start, end) else None, start - lo))
    if not out:
        raise InputError(bed, "no regions")
    if window_bp is not None or context_bp:
        seen = f"one training window ({window_bp:,} bp)" if window_bp is not None else f"{context_bp:,} bp either side"
        log.info("each region seen inside %s of its genome, unmutated (--context; 0: the region alone)", seen)
    if widened:
        log.info("%d of %d regions narrower than %d bp widened to their centre base +- %d bp (--flank; a "
                 "peaks.bed call is one bin wide); the explained bin stays the centre's", widened, len(out),
                 2 * flank_bp + 1, flank_bp)
    return out, dict(genome.lengths)


def _origin_cut(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi) on a circle of n (lo > -n, hi < 2n, hi - lo <= n) as stretches that do not cross the origin."""
    return list(itertools.pairwise(sorted({lo, hi, *(c for c in (0, n) if lo < c < hi)})))


__all__ = ["MAX_INPUTS", "METHODS", "BasesToScore", "ExplainOptions", "Pace", "explain", "gradient_attributions",
           "ism_regions", "ism_sequences", "kmer_products", "mutants", "one_hot", "substitutions"]
