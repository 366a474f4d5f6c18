"""Training: presets, the flat run configuration, the loop (single process or DDP under torchrun), checkpoints.

Tasks:
- "sequence": a labelled set (CSV/TSV, FASTA with label=, FASTA + labels TSV) -> a classifier; validation on
  ``--val-*`` data, selection metric MCC.
- "track": genome FASTA(s) + TSS BED -> per-bin, per-strand promoter logits; windows at random offsets each
  epoch; validation on ``--val-fasta``/``--val-tss`` or the held-out end of every contig; metric pooled AUPRC.

Determinism and resume: the batch order of epoch e comes from (seed, e), augmentation of batch b from
(seed, e, b), and torch's RNG (dropout) is seeded from (seed, optimizer step) before every micro-batch, so a run
resumed from any checkpoint continues exactly as the uninterrupted run. Checkpoints are written at the end of every
epoch and when --max-steps / --max-minutes stop the run, always at an optimizer-step boundary.

DDP: with RANK set (torchrun), every rank builds the same batch list and takes every world-th batch; gradients are
all-reduced, so all ranks hold the same weights and compute the same validation metric and early-stopping decision.
Rank 0 logs and writes the run directory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from genolin import __version__
from genolin import checkpoint as ckpt
from genolin.errors import InputError

log = logging.getLogger(__name__)

TASKS = ("sequence", "track")


@dataclass
class TrainConfig:
    """Every hyperparameter, flat (the keys of --config YAML)."""

    # tokens and windows
    k: int = 6
    stride: int = 1
    window: int = 100_000  # track: window length in bp (a multiple of stride)
    tolerance: int = 1  # track: bins on each side of a TSS bin that count as positive
    val_fraction: float = 0.1  # track without --val-fasta: held-out end of each contig
    windows_per_epoch: int | None = None  # track: default genome length / window
    # model (see genolin.model.EncoderConfig)
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 8
    mixer: str = "linear"
    feature_map: str = "elu"
    feature_dim: int | None = None
    favor_features: int = 128
    favor_redraw_interval: int = 1000
    local_window: int = 128
    conv_kernel: int = 7
    mlp_ratio: float = 8 / 3
    dropout: float = 0.1
    pooling: str = "mean"
    chunk_size: int = 16384
    checkpointing: bool = False
    # optimisation
    epochs: int = 10
    max_steps: int | None = None
    max_minutes: float | None = None
    batch_size: int = 32
    max_tokens: int = 262_144  # sequence task: padded tokens per batch at most
    grad_accum: int = 1
    lr: float = 5e-4
    weight_decay: float = 0.05
    warmup_steps: int = 200
    min_lr_ratio: float = 0.05
    clip: float = 1.0
    rc_prob: float = 0.5
    max_shift: int = 3
    class_weighting: bool = True
    pos_weight: float | None = None  # track: None = balance the training positive rate
    patience: int = 4  # epochs without improvement before stopping (0: never stop early)
    amp: bool = True  # bf16 autocast on CUDA
    seed: int = 0

    def encoder_config(self, *, n_classes: int, track_channels: int):
        from genolin.model import EncoderConfig
        from genolin.tokenize import vocab_size

        return EncoderConfig(
            vocab_size=vocab_size(self.k), d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
            mixer=self.mixer, feature_map=self.feature_map, feature_dim=self.feature_dim,
            favor_features=self.favor_features, favor_redraw_interval=self.favor_redraw_interval,
            window=self.local_window, conv_kernel=self.conv_kernel, mlp_ratio=self.mlp_ratio, dropout=self.dropout,
            n_classes=n_classes, track_channels=track_channels, pooling=self.pooling, chunk_size=self.chunk_size,
            checkpointing=self.checkpointing, seed=self.seed)


PRESETS: dict[str, dict[str, dict]] = {
    # tiny: trains on 2 CPU cores in about five minutes and still learns
    "tiny": {
        "common": dict(d_model=64, n_layers=2, n_heads=4, lr=2e-3, warmup_steps=50, dropout=0.1, patience=3,
                       chunk_size=4096, favor_features=32),
        "sequence": dict(k=4, stride=1, batch_size=64, epochs=15),
        "track": dict(k=6, stride=4, window=4096, batch_size=8, epochs=16, windows_per_epoch=1000),
    },
    "small": {
        "common": dict(d_model=128, n_layers=4, n_heads=4, lr=1e-3, warmup_steps=200, favor_features=64),
        "sequence": dict(k=6, stride=1, batch_size=64, epochs=15),
        "track": dict(k=6, stride=2, window=20_000, batch_size=8, epochs=15),
    },
    "base": {
        "common": dict(d_model=256, n_layers=6, n_heads=8, lr=5e-4, warmup_steps=500, favor_features=128),
        "sequence": dict(k=6, stride=1, batch_size=32, epochs=30),
        "track": dict(k=6, stride=2, window=100_000, batch_size=4, epochs=30),
    },
}


def make_config(task: str, preset: str = "tiny", overrides: dict | None = None,
                source: str = "--config") -> TrainConfig:
    """Defaults < preset < overrides (a YAML file's keys, then command-line options)."""
    if preset not in PRESETS:
        raise InputError(None, f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    values = {**PRESETS[preset]["common"], **PRESETS[preset][task]}
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    for key, value in (overrides or {}).items():
        if key not in known:
            raise InputError(source, f"unknown setting {key!r} (settings: {', '.join(sorted(known))})")
        values[key] = value
    cfg = TrainConfig(**values)
    try:
        cfg.encoder_config(n_classes=2, track_channels=2)  # validates mixer, heads, ...
    except ValueError as exc:
        raise InputError(source, str(exc)) from None
    if task == "track" and cfg.window % cfg.stride:
        raise InputError(source, f"window ({cfg.window}) must be a multiple of stride ({cfg.stride})")
    return cfg


def read_yaml_config(path: str | os.PathLike) -> dict:
    import yaml

    from genolin.io.files import read_text

    try:
        data = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise InputError(path, f"not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping of settings (key: value)")
    return data


def parse_settings(items) -> dict:
    """``KEY=VALUE`` strings -> {key: YAML-typed value} (``epochs=3`` gives 3, ``mixer=favor`` gives "favor")."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("--set", f"expected KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise InputError("--set", f"{key}: value {value!r} is not valid YAML ({exc})") from None
    return out


# --- data sources ---------------------------------------------------------------------------------------------


@dataclass
class DataSpec:
    """Where a run's data come from (stored in config.json so --resume needs no data options)."""

    task: str
    fasta: list[str] = dataclasses.field(default_factory=list)
    csv: str | None = None
    labels: str | None = None
    tss: str | None = None
    val_fasta: list[str] = dataclasses.field(default_factory=list)
    val_csv: str | None = None
    val_labels: str | None = None
    val_tss: str | None = None


def load_sequence_set(fasta: str | None, csv: str | None, labels: str | None, classes=None, min_classes: int = 2):
    from genolin.io.labelled import load_labelled

    return load_labelled(csv or fasta, labels=labels, classes=classes, min_classes=min_classes)


def load_track(fastas: list[str], tss_path: str, cfg: TrainConfig):
    from genolin.data import TrackData
    from genolin.io.bed import read_bed
    from genolin.io.fasta import Genome

    genomes = [Genome(p) for p in fastas]
    lengths = {c: n for g in genomes for c, n in g.lengths.items()}
    return TrackData(genomes, read_bed(tss_path, lengths), window=cfg.window, k=cfg.k, stride=cfg.stride,
                     tolerance=cfg.tolerance, tss_source=tss_path)


# --- distributed ------------------------------------------------------------------------------------------------


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> Dist:
    """torchrun's way: RANK set -> a process group (NCCL on CUDA, gloo on CPU)."""
    if "RANK" not in os.environ:
        return Dist()
    import torch.distributed as tdist

    d = Dist(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0)))
    if not tdist.is_initialized():
        tdist.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    if not d.main:  # rank 0 alone talks: the other ranks' console shows warnings and errors only
        for handler in logging.getLogger("genolin").handlers:
            if type(handler) is logging.StreamHandler:
                handler.setLevel(max(handler.level, logging.WARNING))
    return d


def pick_device(name: str, dist: Dist) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise InputError(None, "--device cuda: no CUDA GPU is available")
        torch.cuda.set_device(dist.local_rank)
        return torch.device("cuda", dist.local_rank)
    return torch.device("cpu")


# --- the loop ---------------------------------------------------------------------------------------------------


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warmup to cfg.lr, then cosine decay to cfg.lr * min_lr_ratio at ``total`` steps."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98))


class Trainer:
    def __init__(self, cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
                 resume: bool = False, progress: bool | None = None):
        self.cfg, self.spec, self.out = cfg, spec, Path(out_dir)
        self.dist = init_distributed("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available())
                                     else "cpu")
        self.device = pick_device(device, self.dist)
        self.progress = progress if self.dist.main else False
        self._load_data()
        self._build_model()
        self.state = {"epoch": 0, "batch": 0, "step": 0, "best": None, "best_epoch": None, "bad_epochs": 0,
                      "done": False}
        if resume:
            self._resume()
        elif self.dist.main:
            self._check_out_dir()

    # -- setup ---------------------------------------------------------------------------------------------------
    def _load_data(self) -> None:
        cfg, spec = self.cfg, self.spec
        from genolin.data import SequenceData, auto_pos_weight, class_weights

        if spec.task == "sequence":
            train_set = load_sequence_set(spec.fasta[0] if spec.fasta else None, spec.csv, spec.labels)
            self.classes = train_set.classes
            self.train_data = SequenceData(train_set, k=cfg.k, stride=cfg.stride)
            val_source = spec.val_csv or (spec.val_fasta[0] if spec.val_fasta else None)
            self.val_data = None
            if val_source:
                val_set = load_sequence_set(spec.val_fasta[0] if spec.val_fasta else None, spec.val_csv,
                                            spec.val_labels, classes=self.classes, min_classes=1)
                self.val_data = SequenceData(val_set, k=cfg.k, stride=cfg.stride)
            self.loss_weight = (class_weights(train_set.labels, len(self.classes)) if cfg.class_weighting
                                else None)
            log.info("training set: %d sequences %s; validation: %d", len(train_set), train_set.class_counts(),
                     len(self.val_data) if self.val_data else 0)
        else:
            self.classes = ["plus", "minus"]
            self.train_data = load_track(spec.fasta, spec.tss, cfg)
            if spec.val_fasta:
                self.val_data = load_track(spec.val_fasta, spec.val_tss, cfg)
                self.train_regions = [(c, 0, n) for c, n in self.train_data.lengths.items()]
                val_regions = [(c, 0, n) for c, n in self.val_data.lengths.items()]
            else:
                self.val_data = self.train_data
                self.train_regions, val_regions = self.train_data.split(cfg.val_fraction)
            self.train_regions = self.train_data.check_fits(self.train_regions, "training part")
            self.val_windows = self.val_data.tiled_windows(val_regions)
            rate = self.train_data.positive_rate(self.train_regions)
            self.pos_weight = cfg.pos_weight if cfg.pos_weight is not None else auto_pos_weight(rate)
            self.loss_weight = torch.tensor([self.pos_weight, self.pos_weight])
            log.info("track: %d training region(s), %d validation windows, positive rate %.5f, pos_weight %.1f",
                     len(self.train_regions), len(self.val_windows), rate, self.pos_weight)

    def _build_model(self) -> None:
        from genolin.model import Encoder

        track = self.spec.task == "track"
        self.enc_cfg = self.cfg.encoder_config(n_classes=0 if track else len(self.classes),
                                               track_channels=2 if track else 0)
        torch.manual_seed(self.cfg.seed)
        self.model = Encoder(self.enc_cfg).to(self.device)
        self.optimizer = make_optimizer(self.model, self.cfg)
        self.net = self.model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = DistributedDataParallel(self.model, device_ids=ids)
        self.loss_weight = self.loss_weight.to(self.device) if self.loss_weight is not None else None

    def _check_out_dir(self) -> None:
        if (self.out / ckpt.STATE).exists():
            raise InputError(self.out, "holds a run already: continue it with --resume, or choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        ckpt.write_json(self.out / ckpt.CONFIG, self.run_config())

    def run_config(self) -> dict:
        return {"genolin": __version__, "task": self.spec.task, "classes": self.classes,
                "train": dataclasses.asdict(self.cfg), "model": self.enc_cfg.to_dict(),
                "data": dataclasses.asdict(self.spec),
                "pos_weight": getattr(self, "pos_weight", None),
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}

    def _resume(self) -> None:
        state = ckpt.read_json(self.out / ckpt.STATE)
        ckpt.load_weights(self.out / ckpt.WEIGHTS, self.model)
        ckpt.load_optimizer(self.out / ckpt.OPTIMIZER, self.optimizer, state.pop("optimizer"))
        self.state.update(state)
        log.info("resuming %s at epoch %d, step %d", self.out, self.state["epoch"] + 1, self.state["step"])

    # -- batches -------------------------------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list:
        """This rank's batches of an epoch: index lists (sequence) or window lists (track)."""
        rng = np.random.default_rng([self.cfg.seed, epoch])
        if self.spec.task == "sequence":
            batches = self.train_data.batches(self.cfg.batch_size, self.cfg.max_tokens, rng)
        else:
            windows = self.train_data.random_windows(self.train_regions, rng, self.cfg.windows_per_epoch)
            bs = self.cfg.batch_size
            batches = [windows[i:i + bs] for i in range(0, len(windows), bs)]
        per_rank = len(batches) // self.dist.world
        if per_rank == 0:
            raise InputError(None, f"too little training data for {self.dist.world} processes")
        usable = per_rank - per_rank % self.cfg.grad_accum or per_rank
        return batches[self.dist.rank::self.dist.world][:usable]

    def collate(self, batch, rng):
        if self.spec.task == "sequence":
            return self.train_data.collate(batch, rng, rc_prob=self.cfg.rc_prob, max_shift=self.cfg.max_shift)
        return self.train_data.collate(batch, rng, rc_prob=self.cfg.rc_prob)

    def loss(self, batch) -> torch.Tensor:
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.cfg.amp and self.device.type == "cuda")
        with autocast:
            out = self.net(batch.ids, batch.mask)
        if self.spec.task == "sequence":
            return F.cross_entropy(out.logits.float(), batch.labels, weight=self.loss_weight)
        logits = out.track.float()[batch.mask]
        return F.binary_cross_entropy_with_logits(logits, batch.targets[batch.mask], pos_weight=self.loss_weight)

    # -- evaluation ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict | None:
        from genolin.evaluate import classification_metrics, track_metrics

        self.model.eval()
        try:
            if self.spec.task == "sequence":
                if self.val_data is None:
                    return None
                probs = predict_sequence_probs(self.model, self.val_data, self.cfg, self.device)
                metrics = classification_metrics(self.val_data.dataset.labels, probs, self.classes)
                metrics["score"] = metrics["mcc"]
                return metrics
            y, p = predict_window_probs(self.model, self.val_data, self.val_windows, self.cfg, self.device,
                                        self.pos_weight)
            metrics = track_metrics(y, p)
            metrics["score"] = metrics["pooled"].get("auprc", 0.0)
            return metrics
        finally:
            self.model.train()

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def save(self, *, best: bool = False) -> None:
        if not self.dist.main:
            return
        meta = {"step": str(self.state["step"]), "epoch": str(self.state["epoch"])}
        ckpt.save_weights(self.out / ckpt.WEIGHTS, self.model, meta)
        if best:
            ckpt.save_weights(self.out / ckpt.BEST, self.model, meta)
        rest = ckpt.save_optimizer(self.out / ckpt.OPTIMIZER, self.optimizer)
        ckpt.write_json(self.out / ckpt.STATE, {**self.state, "optimizer": rest})

    def _log_metrics(self, record: dict) -> None:
        if self.dist.main:
            with open(self.out / "metrics.jsonl", "a") as fh:
                fh.write(json.dumps(record) + "\n")

    # -- main loop -------------------------------------------------------------------------------------------------
    def fit(self) -> dict:
        cfg, st = self.cfg, self.state
        from genolin.progress import progress_bar

        steps_per_epoch = len(self.epoch_batches(0)) // cfg.grad_accum
        total = cfg.epochs * steps_per_epoch
        if cfg.max_steps is not None:
            total = min(total, cfg.max_steps)
        t_start = time.monotonic()
        self.model.train()
        stopped = None
        while st["epoch"] < cfg.epochs and not st["done"]:
            epoch = st["epoch"]
            batches = self.epoch_batches(epoch)
            losses, tokens, t_epoch = [], 0, time.monotonic()
            with progress_bar(total=len(batches), unit="batch", desc=f"epoch {epoch + 1}/{cfg.epochs}",
                              enabled=self.progress) as bar:
                bar.update(st["batch"])
                for b in range(st["batch"], len(batches)):
                    torch.manual_seed(cfg.seed * 1_000_003 + st["step"] * 131 + b % cfg.grad_accum)
                    batch = self.collate(batches[b], np.random.default_rng([cfg.seed, epoch, b])).to(self.device)
                    loss = self.loss(batch)
                    (loss / cfg.grad_accum).backward()
                    losses.append(loss.item())
                    tokens += batch.n_tokens
                    bar.update(1)
                    if (b + 1) % cfg.grad_accum:
                        continue
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip)
                    for group in self.optimizer.param_groups:
                        group["lr"] = lr_at(st["step"], total, cfg)
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    st["step"] += 1
                    st["batch"] = b + 1
                    self.model.redraw_favor_features(st["step"])
                    bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}",
                                    tok_s=f"{tokens * self.dist.world / (time.monotonic() - t_epoch):.0f}")
                    if cfg.max_steps is not None and st["step"] >= cfg.max_steps:
                        stopped = f"max_steps {cfg.max_steps}"
                    elif cfg.max_minutes is not None and time.monotonic() - t_start > cfg.max_minutes * 60:
                        stopped = f"max_minutes {cfg.max_minutes}"
                    if stopped:
                        break
            if stopped and st["batch"] < len(batches):
                self.save()
                log.info("stopped by %s at step %d (epoch %d, batch %d); continue with --resume", stopped,
                         st["step"], epoch + 1, st["batch"])
                break
            metrics = self.validate()
            record = {"epoch": epoch + 1, "step": st["step"], "train_loss": float(np.mean(losses)) if losses else None,
                      "lr": lr_at(max(st["step"] - 1, 0), total, cfg), "seconds": time.monotonic() - t_epoch,
                      "tokens_per_s": tokens * self.dist.world / max(time.monotonic() - t_epoch, 1e-9),
                      "val": metrics}
            improved = metrics is not None and (st["best"] is None or metrics["score"] > st["best"])
            if improved:
                st["best"], st["best_epoch"], st["bad_epochs"] = metrics["score"], epoch + 1, 0
            elif metrics is not None:
                st["bad_epochs"] += 1
            st["epoch"], st["batch"] = epoch + 1, 0
            if cfg.patience and st["bad_epochs"] >= cfg.patience:
                st["done"] = True
                log.info("early stop: no improvement for %d epochs (best %.4f at epoch %d)", cfg.patience,
                         st["best"], st["best_epoch"])
            self.save(best=improved or metrics is None)
            self._log_metrics(record)
            score = "" if metrics is None else f", validation score {metrics['score']:.4f}"
            log.info("epoch %d: loss %.4f, %.0f tokens/s%s", epoch + 1, record["train_loss"] or float("nan"),
                     record["tokens_per_s"], score)
            if stopped:
                break
        if self.dist.world > 1:
            import torch.distributed as tdist

            tdist.barrier(device_ids=[self.device.index] if self.device.type == "cuda" else None)
        return {"epochs": st["epoch"], "steps": st["step"], "best_score": st["best"], "best_epoch": st["best_epoch"],
                "stopped": stopped, "seconds": time.monotonic() - t_start}


# --- prediction helpers (shared with evaluate/predict) ------------------------------------------------------------


@torch.no_grad()
def predict_sequence_probs(model, data, cfg: TrainConfig, device, *, rc_average: bool = False) -> np.ndarray:
    """(n, C) class probabilities for a SequenceData, in its order."""
    out = np.zeros((len(data), model.cfg.n_classes), dtype=np.float64)
    for indices in data.batches(cfg.batch_size, cfg.max_tokens, None):
        batch = data.collate(indices).to(device)
        probs = torch.softmax(model(batch.ids, batch.mask).logits.float(), dim=-1)
        if rc_average:
            arrays = [data.tokens_of(i, rc=True) for i in indices]
            from genolin.data import pad_tokens

            ids, mask = pad_tokens(arrays)
            probs = 0.5 * (probs + torch.softmax(model(ids.to(device), mask.to(device)).logits.float(), dim=-1))
        out[indices] = probs.cpu().numpy()
    return out


def track_probabilities(logits: torch.Tensor, pos_weight: float | None) -> torch.Tensor:
    """Track logits -> probabilities, prior-corrected for the positive weight used in training.

    Weighting positives by w multiplies the odds the model learns by w; subtracting ln(w) from the logits gives
    probabilities calibrated to the training positive rate (the ranking, hence AUROC/AUPRC, is unchanged).
    """
    shift = math.log(pos_weight) if pos_weight and pos_weight > 0 else 0.0
    return torch.sigmoid(logits.float() - shift)


@torch.no_grad()
def predict_window_probs(model, data, windows, cfg: TrainConfig, device, pos_weight: float | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Targets and probabilities (n_bins, 2) over the windows, concatenated."""
    ys, ps = [], []
    for i in range(0, len(windows), cfg.batch_size):
        group = windows[i:i + cfg.batch_size]
        batch = data.collate(group).to(device)
        probs = track_probabilities(model(batch.ids, batch.mask).track, pos_weight)
        mask = batch.mask
        ys.append(batch.targets[mask].cpu().numpy())
        ps.append(probs[mask].cpu().numpy())
    return np.concatenate(ys), np.concatenate(ps)


def train(cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
          resume: bool = False, progress: bool | None = None) -> dict:
    """Train (or continue) a run; returns a summary. The run directory is described in genolin.checkpoint."""
    trainer = Trainer(cfg, spec, out_dir, device=device, resume=resume, progress=progress)
    handler = None
    if trainer.dist.main:
        handler = logging.FileHandler(trainer.out / "train.log")
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logging.getLogger("genolin").addHandler(handler)
    try:
        log.info("genolin %s: %s task, %s parameters, device %s, %d process(es)", __version__, spec.task,
                 f"{trainer.model.n_parameters():,}", trainer.device, trainer.dist.world)
        summary = trainer.fit()
    finally:
        if handler is not None:
            logging.getLogger("genolin").removeHandler(handler)
            handler.close()
        if trainer.dist.world > 1:
            import torch.distributed as tdist

            tdist.destroy_process_group()
    return summary
