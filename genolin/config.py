"""Run settings: ``TrainConfig`` with the encoder's settings nested under ``model``, the presets, where a run's
data come from (``DataSpec``), and the readers of ``--config`` YAML and ``--set KEY=VALUE``.

Setting names (YAML keys, ``--set``): TrainConfig's fields (``k``, ``stride``, ``window_bp``, ``lr``, ...) and
``model.<field>`` for the encoder (``model.d_model``, ``model.mixer``, ``model.local_window_tokens``, ...), in
YAML also as a ``model:`` mapping. An encoder field may be named without ``model.`` (``d_model: 64``): no
TrainConfig field shares its name. The names before the units were spelled out (``window``, ``tolerance``,
``max_shift``, ``local_window``, ``chunk_size``) are read with a warning. What the run derives cannot be set:
``model.vocab_size`` (from ``k``), ``model.n_classes`` / ``model.track_channels`` (from the task), ``model.seed``
(from ``seed``), ``model.pad_id``.

Lengths say their unit: ``*_bp`` in bases, ``*_tokens`` in tokens, ``*_bins`` in track bins (one per token).
Precedence: TrainConfig defaults < preset < YAML < ``--set`` < command-line options. Track presets plan in optimizer
steps (``steps``, ``val_every_steps``); giving ``epochs`` or ``windows_per_epoch`` (and neither of those) plans in
epochs instead.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field

from genolin.errors import InputError
from genolin.model import LENGTH_LIMITED_MAX_TOKENS, LENGTH_LIMITED_MIXERS, EncoderConfig

log = logging.getLogger(__name__)

TASKS = ("sequence", "track")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")  # torch.compile modes for training's compiled blocks
# track task: each training genome's share of the drawn windows, as its training span to the power 1, 0 or 1/2
GENOME_WEIGHTS = ("length", "equal", "sqrt")


@dataclass
class TrainConfig:
    """Every setting of a run. ``model`` is the encoder's config; the run fills in its derived fields."""

    # tokens and windows
    k: int = 6
    stride: int = 1
    window_bp: int = 100_000  # track: window length (a multiple of stride)
    tolerance_bins: int = 1  # track: bins on each side of a TSS bin that count as positive
    val_fraction: float = 0.1  # track without --val-fasta: held-out end of each contig
    # track: how often each training genome's windows are drawn: "length" in proportion to its training span,
    # "equal" as often as every other genome, "sqrt" in proportion to the span's square root (within a genome
    # always by span): "length" lets an 11 Mbp genome outweigh a 1 Mbp one ten to one
    genome_weights: str = "length"
    windows_per_epoch: int | None = None  # track without val_every_steps: default genome length / window
    eval_bin_bp: int = 50  # track scores: evaluation bins per strand (positive: a TSS inside; score: max probability)
    # the encoder
    model: EncoderConfig = field(default_factory=lambda: EncoderConfig(dropout=0.1))
    # optimisation: the schedule is `steps` optimizer steps, or `epochs` passes (tracks: of val_every_steps steps)
    steps: int | None = None  # the schedule's length in optimizer steps (None: epochs x steps per epoch)
    val_every_steps: int | None = None  # track: validation and a checkpoint every this many steps (an "epoch")
    epochs: int = 10
    max_steps: int | None = None  # a stop rule: the schedule ends here at the latest
    max_minutes: float | None = None  # a stop rule: the schedule ends when this run's time is up
    batch_size: int = 32
    max_tokens: int = 262_144  # sequence task: padded tokens per batch at most
    grad_accum: int = 1
    lr: float = 5e-4
    weight_decay: float = 0.05
    warmup_steps: int = 200
    min_lr_ratio: float = 0.05
    clip: float = 1.0
    # an exponential moving average of the weights over optimizer steps (decay d; the first steps average with
    # min(d, (1 + t) / (10 + t))): validation, best.safetensors and so evaluate/predict use the average; 0: off
    ema_decay: float = 0.0
    rc_prob: float = 0.5
    # masked-token prediction beside the task's loss (genolin.tasks.masking): loss += mlm_weight x the masked
    # tokens' cross-entropy, tokens chosen with probability mlm_prob (spans of ceil(k / stride)); 0: off
    mlm_weight: float = 0.0
    mlm_prob: float = 0.15
    max_shift_bp: int = 3  # sequence task: up to this many leading bases dropped at random
    # each A/C/G/T of a training sequence (sequence task) or window (track task) replaced, with this probability,
    # by one of the four drawn at random (itself a quarter of the time): EvoAug-style substitutions; 0: off
    mutate_prob: float = 0.0
    # sequence task: each training sequence cropped around its centre to a length drawn log-uniformly from
    # crop_min_bp to L ** u_max * crop_min_bp ** (1 - u_max), L its length and u_max rising from 0 to 1 over the
    # first crop_growth of the schedule (0: crops of any length from the start): a curriculum from the centre
    # outwards, so a long-window model finds the local signal first; 0: off (the long-sequence recipe turns it on
    # for inputs of LONG_CROP_BP and more)
    crop_min_bp: int = 0
    crop_growth: float = 0.5
    # sequence task: cross-entropy against targets with this much of the mass spread evenly over the classes
    # (Szegedy et al. 2016); 0: off
    label_smoothing: float = 0.0
    # sharpness-aware minimization (Foret et al. 2021): each optimizer step takes its gradient at the weights moved
    # sam_rho along the batch's normalized gradient (w + rho g / ||g||), which costs a second forward and backward
    # per step; 0: off
    sam_rho: float = 0.0
    class_weighting: bool = True
    pos_weight: float | None = None  # track: None = balance the training positive rate
    focal_gamma: float = 0.0  # track: focal loss exponent (0: plain positive-weighted cross-entropy)
    # track with --teacher: each training target is (1 - w) x the TSS label + w x the teacher's probability
    # (genolin.tasks.track_distill); validation and model choice use the labels alone
    distill_weight: float = 0.5
    patience: int = 4  # epochs without improvement before stopping (0: never stop early)
    # memorisation: validation has not improved for MEMORISE_VALIDATIONS validations while the training loss fell
    # by MEMORISE_DROP or more since the best one (genolin.selection); the log says so, and with this the run stops
    stop_memorising: bool = False
    amp: bool = True  # bf16 autocast on CUDA
    # CUDA: a training step of fixed shapes (track windows) replayed from a CUDA graph (genolin.train_graph)
    cuda_graphs: bool = True
    compile: bool = False  # CUDA: torch.compile the encoder's blocks (Encoder.compile_blocks; ~10-30 s at the start)
    # with compile: the share of activations compiled blocks keep for backward (Encoder.set_activation_memory_budget;
    # None: torch's default, 1); lower recomputes more inside the compiled backward (0.13: about a fifth of the memory)
    compile_memory_budget: float | None = None
    # with compile: torch.compile's mode, "default" or "max-autotune-no-cudagraphs" (inductor times kernel choices
    # while compiling, a minute or more on a machine's first run, for somewhat faster steps)
    compile_mode: str = "default"
    seed: int = 0
    # the weights this run started from (``genolin train --init``: a run directory's or a bundled model's); None:
    # initialised at random from ``seed``
    init_weights: str | None = None

    def encoder_config(self, head: dict, longest: int) -> EncoderConfig:
        """The encoder of a run: ``model`` with the vocabulary of k, the task's head and the run's seed; a
        length-limited mixer (linformer, synthesizer) without a max_len gets ``longest``, the longest training
        input in tokens."""
        from genolin.tokenize import vocab_size

        if self.model.mixer in LENGTH_LIMITED_MIXERS and not self.model.max_len:
            head = {**head, "max_len": longest}
        return dataclasses.replace(self.model, vocab_size=vocab_size(self.k), seed=self.seed, **head)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        """From ``to_dict`` output (a saved run); TypeError/ValueError on unknown or bad fields."""
        values = dict(values)
        model = values.pop("model")
        if not isinstance(model, dict):
            raise TypeError("'model' is not a mapping")
        return cls(**values, model=EncoderConfig(**model))


TRAIN_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig)) - {"model"}
ENCODER_FIELDS = frozenset(f.name for f in dataclasses.fields(EncoderConfig))
DERIVED = {"vocab_size": "k", "n_classes": "the task", "track_channels": "the task", "seed": "seed",
           "pad_id": "the tokenizer"}
RENAMED = {"window": "window_bp", "tolerance": "tolerance_bins", "max_shift": "max_shift_bp",
           "local_window": "model.local_window_tokens", "chunk_size": "model.chunk_tokens",
           "model.window": "model.local_window_tokens", "model.chunk_size": "model.chunk_tokens"}


# What each preset was chosen on, with the measurements: docs/benchmarks.md, "How the presets were chosen".
# Track presets: a schedule in optimizer steps that ends by the preset's time budget at the latest (max_minutes: the
# cosine is stretched over the clock where steps would run past it); hybrid mixer (linear attention in tiny, whose
# local softmax was over half of the hybrid's CPU time), 8 kb windows, positives within +-24 bp of a TSS while
# training. base reads 6-mers at stride 4: held-out AUPRC as stride 2's for half the tokens, so predict runs
# faster (stride 1 did not beat it either, in a screen that handicapped it: docs/benchmarks.md).
# Sequence presets: single-base tokens under a width-15 convolutional stem, early stopping after 10 epochs without
# a better dev MCC. small and base train with reverse complements (predict and evaluate average both strands) and the
# dense synthesizer, the best mixer on the GUE promoter tasks; it is length-limited (model.max_len: the longest
# training sequence unless set). tiny (2 CPU cores) adds the bag-of-k-mers logits and trains without reverse
# complements, so its k-mer term starts from the forward-strand regression a k-mer baseline fits.
# Long sequences (the longest training or validation input above LONG_SEQUENCE_BP): the "sequence_long" section
# replaces "sequence". Single-base tokens through a 15-wide convolution stem averaged over groups of 1, 2 or 4
# (``long_stride``: what keeps the longest input within LONG_TOKENS), a linear-time mixer (linear attention on 2 CPU
# cores, the hybrid on GPUs), batches by a token budget (max_tokens counts bases; length-bucketed), reverse
# complements and shifts as augmentation (predict averages both strands), and attention pooling with a learned
# score per relative position and a learned slope on log-distance from the centre: a mean over 100 kbp dilutes a
# promoter's few tokens 1,000-fold, and the slope, trained on crops, keeps the far context of a whole window from
# outweighing the centre (docs/benchmarks.md, "A learned distance slope in the pooling"). The slope starts where each
# token weighs 1 / (1 + distance) (pool_distance_power 1): started flat it learned too little of that in a short
# schedule (it ends near where power 1 starts it), and the far context still cost 2-5 AUROC points; with the start
# and a weight average (LONG_EMA) the 100 kbp model beats the 1 kbp one on all three held-out genomes
# (docs/benchmarks.md, "The slope's start"). 6-mer tokens (the
# earlier recipe) memorised their training genomes and transferred at chance (docs/benchmarks.md, "Long-context
# classification"). Inputs over CHECKPOINT_TOKENS tokens after the stem recompute each block.
LONG_SEQUENCE_BP = 1024
LONG_TOKENS = 32_768
CHECKPOINT_TOKENS = 65_536
LONG_CROP_BP = 32_768  # inputs this long train with centre crops from CROP_MIN_BP (docs/benchmarks.md)
CROP_MIN_BP = 1_000
LONG_HEAD = dict(pooling="attention", pool_position_bins=128, pool_distance_slope=True, pool_distance_power=1.0,
                 stem_kernel=15, kmer_logits=0)
# the long recipe's weight average: measured together with the slope's start, not shown to help on its own (on
# E. coli the start alone scored 0.8 AUROC points higher, 1.8 standard errors; docs/benchmarks.md)
LONG_EMA = 0.995


def long_stride(longest_bp: int) -> int:
    """1, 2 or 4: the finest grouping of bases (the pooled stem's, or k-mer tokens' stride) that holds
    ``longest_bp`` within LONG_TOKENS tokens."""
    return next((s for s in (1, 2) if -(-longest_bp // s) <= LONG_TOKENS), 4)


PRESETS: dict[str, dict[str, dict]] = {
    # tiny: trains on 2 CPU cores (sequences: minutes; tracks: 10 minutes at most)
    "tiny": {
        "common": dict(lr=2e-3, warmup_steps=50, patience=3,
                       model=dict(d_model=64, n_layers=2, n_heads=4, dropout=0.1, chunk_tokens=4096,
                                  favor_features=32)),
        "sequence": dict(k=1, stride=1, batch_size=64, epochs=15, patience=10, rc_prob=0.0,
                         model=dict(stem_kernel=15, kmer_logits=6, mixer="synthesizer")),
        "sequence_long": dict(k=1, stride=1, batch_size=16, max_tokens=2**15, epochs=15, patience=5, max_minutes=10,
                              ema_decay=LONG_EMA, model=dict(mixer="linear", **LONG_HEAD)),
        "track": dict(k=6, stride=4, window_bp=8192, tolerance_bins=6, batch_size=4, steps=2000, val_every_steps=250,
                      warmup_steps=100, max_minutes=10, patience=0,
                      model=dict(mixer="linear", d_model=32, n_heads=2)),
    },
    # small: one GPU, 10 minutes for tracks
    "small": {
        "common": dict(lr=1e-3, warmup_steps=200, model=dict(d_model=128, n_layers=4, n_heads=4, favor_features=64)),
        "sequence": dict(k=1, stride=1, batch_size=64, epochs=15, patience=10,
                         model=dict(stem_kernel=15, mixer="synthesizer")),
        # inputs trained on crops (crop_min_bp: by default from LONG_CROP_BP) train 2 epochs: since the first
        # epoch's short crops took seconds, the time budget ran 6 epochs that memorised (E. coli held out: AUROC
        # 74.4 +- 2.5 against 77.0 +- 0.2 at the 1.5 epochs it had held before); 2 epochs 77.4 +- 0.8, ahead of 3 on
        # dev at every seed (docs/benchmarks.md, "The schedule for cropped inputs")
        "sequence_long": dict(k=1, stride=1, batch_size=32, max_tokens=2**18, epochs=15, patience=5, max_minutes=10,
                              ema_decay=LONG_EMA, model=dict(mixer="hybrid", **LONG_HEAD), cropped=dict(epochs=2)),
        # 8 windows x 2,250 steps: on held-out genomes (three seeds) ahead of the 16 x 20,000 before, which memorised
        # and ran into its 10-minute limit (docs/benchmarks.md, "small preset: the step budget"). Bases redrawn with
        # probability 0.1: ahead of no mutations at every seed; 4,500 steps with them not separated ("mutations with
        # longer schedules")
        "track": dict(k=6, stride=2, window_bp=8192, tolerance_bins=12, batch_size=8, steps=2_250, mutate_prob=0.1,
                      val_every_steps=1000, warmup_steps=100, max_minutes=10, patience=0, model=dict(mixer="hybrid")),
    },
    # base: one GPU, 15 minutes for tracks
    "base": {
        "common": dict(lr=5e-4, warmup_steps=500, model=dict(d_model=256, n_layers=6, n_heads=8, favor_features=128)),
        "sequence": dict(k=1, stride=1, batch_size=32, epochs=30, patience=10,
                         model=dict(stem_kernel=15, mixer="synthesizer")),
        # the MLP recomputed in backward: the fastest recompute setting within 2 GiB per 100 kbp sequence
        # (docs/benchmarks.md, "Long-context classification"). Cropped inputs train 2 epochs, as small's: with 30
        # every run memorised by its fifth and kept its first or second (E. coli held out: AUROC 71.5 +- 1.4 against
        # 77.7 +- 0.3 at 2 epochs; C. jejuni, a reduced set, within noise; docs/benchmarks.md, "base's long recipe")
        "sequence_long": dict(k=1, stride=1, batch_size=32, max_tokens=2**18, epochs=30, patience=5, max_minutes=15,
                              ema_decay=LONG_EMA, model=dict(mixer="hybrid", checkpoint_mlp=True, **LONG_HEAD),
                              cropped=dict(epochs=2)),
        # 8 windows a step; each base of a training window redrawn at random with probability 0.1 (about 1 in 13
        # changed): ahead of no mutations on every held-out genome and seed, and of 0.05 and 0.2 on the mean at every
        # seed (docs/benchmarks.md, "base preset: random mutations"). 9,000 steps: on the eleven-genome proxy ahead
        # of 4,500 at every seed (mean held-out AUPRC 0.1252 against 0.1084, near and far genomes both), none
        # memorising; on three training genomes the two tied ("Eleven bacterial genomes", "mutations with longer
        # schedules")
        "track": dict(k=6, stride=4, window_bp=8192, tolerance_bins=6, batch_size=8, steps=9_000, mutate_prob=0.1,
                      val_every_steps=1000, lr=1e-3,
                      warmup_steps=100, max_minutes=15, patience=0, model=dict(mixer="hybrid")),
    },
}
EPOCH_MODE = ("epochs", "windows_per_epoch")  # a user's choice of these drops a preset's step budget


@dataclass(frozen=True)
class Setting:
    """One setting a user gave: where it came from is ``source`` (a YAML file, "--set KEY=VALUE", "--epochs")
    and, for files, ``line``."""

    key: str
    value: object
    source: str
    line: int | None = None

    def error(self, message: str) -> InputError:
        return InputError(self.source, f"setting {self.key!r}: {message}", self.line)


def _annotations() -> dict[str, str]:
    """Setting name -> its type as written in the dataclass ("int", "float | None", ...)."""
    out = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig) if f.name != "model"}
    out.update({f"model.{f.name}": str(f.type) for f in dataclasses.fields(EncoderConfig)})
    return out


TYPES = _annotations()

# Ranges, checked after types: name -> (test, what it must be)
RULES: dict[str, tuple] = {
    "k": (lambda v: 1 <= v <= 12, "from 1 to 12"),
    "val_fraction": (lambda v: 0 < v < 1, "between 0 and 1 (exclusive)"),
    "min_lr_ratio": (lambda v: 0 <= v <= 1, "from 0 to 1"),
    "ema_decay": (lambda v: 0 <= v < 1, "at least 0 and below 1"),
    "compile_memory_budget": (lambda v: 0 < v <= 1, "above 0 and at most 1"),
    "model.pool_position_scale": (lambda v: 0 < v <= 1e4, "above 0 and at most 10000"),
    "model.pool_distance_power": (lambda v: 0 <= v <= 8, "from 0 to 8"),
    "model.pool_position_bins": (lambda v: 0 <= v <= 2**16, "from 0 to 65536"),
    "compile_mode": (lambda v: v in COMPILE_MODES, " or ".join(COMPILE_MODES)),
    "genome_weights": (lambda v: v in GENOME_WEIGHTS, "length, equal or sqrt"),
    "rc_prob": (lambda v: 0 <= v <= 1, "from 0 to 1"),
    "mutate_prob": (lambda v: 0 <= v <= 1, "from 0 to 1"),
    "distill_weight": (lambda v: 0 <= v <= 1, "from 0 to 1"),
    "crop_growth": (lambda v: 0 <= v <= 1, "from 0 to 1"),
    "label_smoothing": (lambda v: 0 <= v < 1, "at least 0 and below 1"),
    "mlm_prob": (lambda v: 0 < v < 1, "between 0 and 1 (exclusive)"),
    "model.dropout": (lambda v: 0 <= v < 1, "at least 0 and below 1"),
    "model.drop_path": (lambda v: 0 <= v < 1, "at least 0 and below 1"),
    "model.mlp_ratio": (lambda v: 0 < v <= 64, "above 0 and at most 64"),
    "model.n_classes": (lambda v: v >= 0, "0 or more"),
    "model.track_channels": (lambda v: v >= 0, "0 or more"),
    "model.pad_id": (lambda v: v >= 0, "0 or more"),
    "model.vocab_size": (lambda v: v >= 1, "1 or more"),
    **{k: (lambda v: v > 0, "above 0") for k in ("lr", "clip", "max_minutes", "pos_weight", "model.eps")},
    **{k: (lambda v: v >= 0, "0 or more") for k in ("tolerance_bins", "weight_decay", "warmup_steps", "max_shift_bp",
                                                    "crop_min_bp", "mlm_weight", "sam_rho", "focal_gamma", "patience",
                                                    "seed", "model.favor_redraw_interval", "model.max_len")},
    **{k: (lambda v: v >= 1, "1 or more") for k in (
        "stride", "window_bp", "windows_per_epoch", "eval_bin_bp", "steps", "val_every_steps", "epochs", "max_steps",
        "batch_size", "max_tokens", "grad_accum", "model.d_model", "model.n_layers", "model.n_heads",
        "model.feature_dim", "model.favor_features", "model.local_window_tokens", "model.conv_kernel",
        "model.chunk_tokens", "model.linformer_rows", "model.synthesizer_rank")},
}
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def coerce(setting: Setting, key: str) -> object:
    """The value of ``setting`` (the field ``key``) parsed to the field's type ("1e-3" and 1 for a float, "1_000"
    for an int, "yes" for a bool) and range-checked; an InputError naming where the setting came from otherwise."""
    kind = TYPES[key]
    value = setting.value
    if value is None or (isinstance(value, str) and value.strip().lower() in ("null", "none", "~")):
        if "None" in kind:
            return None
        raise setting.error("needs a value")
    base = kind.split("|")[0].strip()
    try:
        if base == "bool":
            text = str(value).strip().lower()
            if isinstance(value, bool) or text in _TRUE | _FALSE:
                value = value if isinstance(value, bool) else text in _TRUE
            else:
                raise ValueError
        elif base == "int":
            if isinstance(value, bool):
                raise ValueError
            number = float(value) if isinstance(value, float) else float(str(value).strip())
            if not number.is_integer() or abs(number) > 2**53:
                raise ValueError
            value = int(number)
        elif base == "float":
            if isinstance(value, bool):
                raise ValueError
            value = float(str(value).strip()) if isinstance(value, str) else float(value)
            if not abs(value) <= 1e12:  # NaN, infinities and absurd sizes
                raise ValueError
        elif not isinstance(value, str):
            raise ValueError
    except (TypeError, ValueError):
        what = {"bool": "true or false", "int": "a whole number", "float": "a number", "str": "text"}[base]
        raise setting.error(f"expected {what}, got {setting.value!r}") from None
    rule = RULES.get(key)
    if rule and not rule[0](value):
        raise setting.error(f"must be {rule[1]}, got {setting.value!r}")
    return value


def flatten(values: dict, source: str, prefix: str = "") -> dict:
    """Nested mappings -> dotted keys: ``{"model": {"d_model": 64}}`` -> ``{"model.d_model": 64}``."""
    out = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if name == "model" and not isinstance(value, dict):
            raise InputError(source, "setting 'model': expected a mapping of encoder settings (model.d_model, ...)")
        if isinstance(value, dict) and name == "model":
            out.update(flatten(value, source, prefix="model."))
        else:
            out[name] = value
    return out


def canonical_name(key: str, source: str) -> str:
    """A setting's name as TrainConfig spells it: a TrainConfig field or ``model.<encoder field>``."""
    if key in RENAMED:
        log.warning("%s: setting %r is now called %r", source, key, RENAMED[key])
        key = RENAMED[key]
    if key in TRAIN_FIELDS:
        return key
    name = key.removeprefix("model.")
    if name in DERIVED and (key.startswith("model.") or name not in TRAIN_FIELDS):
        raise InputError(source, f"setting {key!r} cannot be set: the run derives it from {DERIVED[name]}")
    if name not in ENCODER_FIELDS:
        known = sorted(TRAIN_FIELDS) + sorted(f"model.{f}" for f in ENCODER_FIELDS - set(DERIVED))
        raise InputError(source, f"unknown setting {key!r} (settings: {', '.join(known)})")
    return f"model.{name}"


def preset_values(preset: str, task: str, longest_bp: int | None = None) -> dict:
    """The settings a preset gives a task, flat (``model.d_model``): a sequence task whose longest input is above
    LONG_SEQUENCE_BP gets the "sequence_long" section, its stem pooled over ``long_stride`` bases (and its batch
    budget in bases scaled to match). Its "cropped" settings wait for ``_fit_recipe``: they go with the crops."""
    section = long_section(preset, task, longest_bp)
    chosen = {k: v for k, v in PRESETS[preset][section or task].items() if k != "cropped"}
    values = {**flatten(PRESETS[preset]["common"], "preset"), **flatten(chosen, "preset")}
    if section:
        values["model.stem_pool"] = long_stride(longest_bp)
        values["max_tokens"] *= values["model.stem_pool"]
    return values


def describe_tokens(cfg: TrainConfig) -> str:
    """What the blocks see, in words: "6-mer tokens at stride 2", "single bases, a 15-wide convolution stem
    averaged over groups of 4"."""
    text = f"{cfg.k}-mer tokens" if cfg.k > 1 else "single bases"
    text += f" at stride {cfg.stride}" if cfg.stride > 1 or cfg.k > 1 else ""
    if cfg.model.stem_kernel:
        text += f", a {cfg.model.stem_kernel}-wide convolution stem"
    if cfg.model.stem_pool > 1:
        text += f" averaged over groups of {cfg.model.stem_pool}"
    return text


def long_section(preset: str, task: str, longest_bp: int | None) -> str | None:
    """The preset's section for ``task``'s long inputs ("<task>_long"), where the task reads its inputs by
    length (``Task.longest_input_bp``), the longest is above LONG_SEQUENCE_BP and the preset has one; else None."""
    name = f"{task}_long"
    long = longest_bp is not None and longest_bp > LONG_SEQUENCE_BP
    return name if long and name in PRESETS.get(preset, {}) else None


def windowed(preset: str, task: str) -> bool:
    """Whether ``task`` trains on windows of a genome (its preset section sets ``window_bp``)."""
    return "window_bp" in PRESETS.get(preset, {}).get(task, {})


def _fit_recipe(values: dict, user: dict, longest_bp: int | None, cropped: dict) -> None:
    """The long-sequence recipe's choices that follow the user's settings (in place on the flat ``values``), each
    unless the user set it: k-mer tokens (k > 1) take the grouping as their stride (at most k: every base in some
    token) and no pooled stem; no pooled stem without a stem wide enough, or with masked-token training (its
    targets are per token); whole-block recompute above CHECKPOINT_TOKENS tokens after the stem; centre crops
    from CROP_MIN_BP for inputs of LONG_CROP_BP and more, and with crops the section's ``cropped`` settings (its
    schedule); no position bins under mean pooling, and no starting power without the distance slope."""
    pool = values.get("model.stem_pool", 1)
    if values["k"] > 1 and "model.stem_pool" not in user:
        if "stride" not in user:
            values["stride"] = min(pool, values["k"])
        if "max_tokens" not in user:
            values["max_tokens"] = max(1, values["max_tokens"] // pool)  # tokens are what the blocks see
        values["model.stem_pool"] = 1
    if "model.stem_pool" not in user and (values.get("model.stem_kernel", 0) < pool
                                         or values.get("mlm_weight", 0) > 0):
        values["model.stem_pool"] = 1
    tokens = -(-longest_bp // (values.get("stride", 1) * values.get("model.stem_pool", 1)))
    if "model.checkpointing" not in user and tokens > CHECKPOINT_TOKENS:
        values["model.checkpointing"] = True
    if "crop_min_bp" not in user and longest_bp >= LONG_CROP_BP:
        values["crop_min_bp"] = CROP_MIN_BP
    if values.get("crop_min_bp"):
        values.update({k: v for k, v in flatten(cropped, "preset").items() if k not in user})
    if values.get("model.pooling") == "mean":  # no scores to add to: the recipe's position terms go with them
        for key, off in (("model.pool_position_bins", 0), ("model.pool_distance_slope", False)):
            if key not in user:
                values[key] = off
    if not values.get("model.pool_distance_slope") and "model.pool_distance_power" not in user:
        values["model.pool_distance_power"] = 0.0  # the slope's start goes with the slope


def make_config(task: str, preset: str = "tiny", overrides: dict | list[Setting] | None = None,
                source: str = "--config", *, longest_bp: int | None = None) -> TrainConfig:
    """Defaults < preset < overrides: Settings in the order given (a YAML file's, then --set, then command-line
    options), or a dict of settings from ``source``. Every value is typed and range-checked here, before any data
    are read. ``longest_bp``: the longest input of a sequence task (training and validation), which chooses the
    preset's recipe (``preset_values``) and is checked against a length-limited mixer's limit."""
    if preset not in PRESETS:
        raise InputError(None, f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    values, section = preset_values(preset, task, longest_bp), long_section(preset, task, longest_bp)
    long, windows = section is not None, windowed(preset, task)
    if isinstance(overrides, dict) or overrides is None:
        overrides = [Setting(k, v, source) for k, v in flatten(overrides or {}, source).items()]
    user: dict[str, Setting] = {}
    for item in overrides:
        user[canonical_name(item.key, item.source if item.line is None else f"{item.source}:{item.line}")] = item
    if any(k in user for k in EPOCH_MODE) and not any(k in user for k in ("steps", "val_every_steps")):
        values.pop("steps", None)  # epochs asked for: the schedule is epochs of windows_per_epoch windows
        values.pop("val_every_steps", None)
    values.update({key: coerce(item, key) for key, item in user.items()})
    if long:
        _fit_recipe(values, user, longest_bp, PRESETS[preset][section].get("cropped", {}))
    limited = values.get("model.mixer") in LENGTH_LIMITED_MIXERS
    if limited and values.get("model.max_len", 0) > LENGTH_LIMITED_MAX_TOKENS:
        item = user.get("model.max_len") or user.get("model.mixer")
        raise item.error(f"the {values['model.mixer']} mixer takes at most {LENGTH_LIMITED_MAX_TOKENS:,} tokens "
                         f"(model.max_len {values['model.max_len']:,}); use a linear-time mixer (--set mixer=linear, "
                         f"or hybrid, favor)")
    train = {k: v for k, v in values.items() if not k.startswith("model.")}
    model = {k.removeprefix("model."): v for k, v in values.items() if k.startswith("model.")}
    given = [item for key, item in user.items() if key.startswith("model.")]
    try:
        cfg = TrainConfig(**train)
        cfg.model = dataclasses.replace(cfg.model, **model)  # checks mixer, heads, windows against each other
    except ValueError as exc:
        where = given[-1] if given else None
        raise InputError(where.source if where else None, f"{exc} (preset {preset!r}"
                         + (", with the settings given)" if given else ")"), where.line if where else None) from None
    if cfg.mlm_weight > 0 and cfg.model.stem_pool > 1:
        item = user.get("model.stem_pool") or user.get("mlm_weight")
        raise InputError(item.source if item else None, "mlm_weight needs model.stem_pool 1 (masked-token targets "
                                                        "are per token; the pooled stem averages tokens)",
                         item.line if item else None)
    if long:
        log.warning("inputs of up to %s bp (over %s): the long-sequence recipe (%s, %s mixer, %s pooling%s)",
                 f"{longest_bp:,}", f"{LONG_SEQUENCE_BP:,}", describe_tokens(cfg), cfg.model.mixer, cfg.model.pooling,
                 ", blocks recomputed in backward" if cfg.model.checkpointing else "")
        if cfg.crop_min_bp:
            log.info("training batches cropped around their centres, from %s bp growing to the whole over the "
                     "first %g of the schedule (crop_min_bp, crop_growth)%s", f"{cfg.crop_min_bp:,}", cfg.crop_growth,
                     f"; {cfg.epochs} epochs" if cfg.steps is None else "")
    if longest_bp is not None and cfg.model.mixer in LENGTH_LIMITED_MIXERS:
        tokens = max(1, -(-(longest_bp - cfg.k + 1) // cfg.stride))
        if tokens > LENGTH_LIMITED_MAX_TOKENS:
            item = user.get("model.mixer") or user.get("k") or user.get("stride")
            raise InputError(item.source if item else None,
                             f"the {cfg.model.mixer} mixer takes at most {LENGTH_LIMITED_MAX_TOKENS:,} tokens; the "
                             f"longest input here has {longest_bp:,} bp ({tokens:,} tokens at k = {cfg.k}, stride "
                             f"{cfg.stride}): use a linear-time mixer (--set mixer=linear, or hybrid, favor)",
                             item.line if item else None)
    if cfg.model.kmer_logits and cfg.k != 1 and "model.kmer_logits" not in user:
        # the preset's bag-of-k-mers term counts single bases: with k-mer tokens it is left out
        cfg.model = dataclasses.replace(cfg.model, kmer_logits=0)
        log.info("model.kmer_logits left out: the preset's bag-of-k-mers term needs single-base tokens (k = 1; "
                 "here k = %d)", cfg.k)
    if cfg.model.kmer_logits and (cfg.k != 1 or windows):
        item = user.get("model.kmer_logits") or user.get("k")
        raise InputError(item.source if item else None, "model.kmer_logits needs a sequence classifier with "
                                                        f"single-base tokens (k = 1; here: {task}, k = {cfg.k})",
                         item.line if item else None)
    if windows and cfg.window_bp % cfg.stride:
        item = user.get("window_bp") or user.get("stride")
        raise InputError(item.source if item else None, f"window_bp ({cfg.window_bp}) must be a multiple of stride "
                                                        f"({cfg.stride})", item.line if item else None)
    window_tokens = cfg.window_bp // cfg.stride
    if windows and cfg.model.mixer in LENGTH_LIMITED_MIXERS and 0 < cfg.model.max_len < window_tokens:
        item = user.get("model.max_len") or user.get("window_bp") or user.get("model.mixer")
        raise InputError(item.source if item else None,
                         f"windows of {window_tokens} tokens (window_bp / stride) are longer than the "
                         f"{cfg.model.mixer} mixer's model.max_len ({cfg.model.max_len})", item.line if item else None)
    return cfg


def read_yaml_config(path: str | os.PathLike) -> list[Setting]:
    """The settings of a YAML file, each with its line (a ``model:`` mapping gives ``model.<key>`` settings)."""
    import yaml

    from genolin.io.files import read_text

    text = read_text(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(path, f"not valid YAML: {problem}", mark.line + 1 if mark else None) from None
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        raise InputError(path, "expected a mapping of settings (key: value)")
    out = []
    for key_node, value_node in root.value:
        key = data_key = key_node.value
        if key == "model" and not isinstance(value_node, yaml.MappingNode):
            raise InputError(path, "setting 'model': expected a mapping of encoder settings (d_model: ..., mixer: "
                                   "...)", key_node.start_mark.line + 1)
        if key == "model":
            for sub_key, _ in value_node.value:
                out.append(Setting(f"model.{sub_key.value}", data["model"][sub_key.value], str(path),
                                   sub_key.start_mark.line + 1))
            continue
        out.append(Setting(key, data[data_key], str(path), key_node.start_mark.line + 1))
    return out


def parse_settings(items) -> list[Setting]:
    """``KEY=VALUE`` strings -> Settings with YAML-read values (``epochs=3`` gives 3, ``model.mixer=favor``
    "favor"); each names its item as where it came from."""
    import yaml

    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("--set", f"expected KEY=VALUE, got {item!r}")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value  # typed against the setting's field like any text
        out.append(Setting(key.strip(), parsed, f"--set {item}"))
    return out


@dataclass
class DataSpec:
    """Where data come from: a run's training and validation data (saved in config.json, so --resume needs no
    data options), or the inputs of evaluate / predict (``fasta``, ``csv``, ``labels``, ``tss``)."""

    task: str = ""
    fasta: list[str] = dataclasses.field(default_factory=list)
    csv: str | None = None
    labels: str | None = None
    tss: list[str] = dataclasses.field(default_factory=list)  # one BED per FASTA, in order, or one for all
    val_fasta: list[str] = dataclasses.field(default_factory=list)
    val_csv: str | None = None
    val_labels: str | None = None
    val_tss: list[str] = dataclasses.field(default_factory=list)
    # genomes: contigs to read as circular besides those whose FASTA header says so, by name, or ["all"]
    circular: list[str] = dataclasses.field(default_factory=list)
    # track training: run directories or bundled models whose probabilities join the labels as soft targets (their
    # ensemble when several; TrainConfig.distill_weight)
    teacher: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, values: dict) -> DataSpec:
        """From a saved run (a TSS BED was one path before several genomes were supported)."""
        values = dict(values)
        for key in ("tss", "val_tss"):
            if values.get(key) is None or isinstance(values[key], str):
                values[key] = [values[key]] if values.get(key) else []
        return cls(**values)


# --- run configs written before format 2 (flat settings, encoder config beside them) ---------------------------

FORMAT = 2


def migrate_run_config(saved: dict) -> dict:
    """A config.json of any earlier format -> format 2 (``train`` nested with ``model``); others unchanged.

    Format 1 kept every encoder setting twice (flat in ``train`` and resolved in ``model``); the resolved one
    wins. Renamed: train window/tolerance/max_shift -> window_bp/tolerance_bins/max_shift_bp; encoder window /
    chunk_size -> local_window_tokens / chunk_tokens.
    """
    if saved.get("format", 1) >= FORMAT:
        return saved
    model = dict(saved["model"])
    for old, new in (("window", "local_window_tokens"), ("chunk_size", "chunk_tokens")):
        if old in model:
            model[new] = model.pop(old)
    train = {}
    for key, value in saved["train"].items():
        key = RENAMED.get(key, key)
        if key in TRAIN_FIELDS:
            train[key] = value
    migrated = {k: v for k, v in saved.items() if k != "model"}
    return {**migrated, "format": FORMAT, "train": {**train, "model": model}}


__all__ = ["PRESETS", "TASKS", "DataSpec", "Setting", "TrainConfig", "make_config", "migrate_run_config",
           "parse_settings", "read_yaml_config"]
