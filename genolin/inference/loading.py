"""A run directory (or several: an ensemble) loaded for prediction: its settings, task, best weights on the
device asked for, and the ``Predictor`` that applies them.

    load_run(RUN_DIR, device) -> Run: config (RunConfig), task, model (best weights, eval mode), predictor
    load_run([RUN_DIR, ...], device) -> Run of an ensemble: every probability the mean of its members'
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genolin import checkpoint as ckpt
from genolin.checkpoint import RunConfig
from genolin.device import Dist, cpu_bf16, init_distributed, pick_device
from genolin.errors import InputError
from genolin.inference.predictor import Predictor
from genolin.inference.views import default_views
from genolin.model import LENGTH_LIMITED_MIXERS, Encoder
from genolin.models import resolve_models
from genolin.tasks import TASK_TYPES, Task, get_task
from genolin.timings import mark

log = logging.getLogger(__name__)

WINDOW_BATCH_TOKENS = {False: 2**15, True: 2**18}  # tokens per batch of genome windows: CPU, CUDA (RC doubles it)


@dataclass
class Run:
    """A trained run, ready to predict."""

    config: RunConfig
    task: Task
    model: Encoder
    predictor: Predictor
    weights: Path  # the weights file loaded
    threshold: float | None = None  # chosen on validation (tracks: max F1, classifiers: max MCC) with these weights
    tss_per_mbp: float | None = None  # tracks: the training genomes' TSS density (an ensemble: the members' mean)

    def decision_threshold(self, given: float | None) -> float:
        """``given`` (a --threshold), else the stored one, else 0.5; logged with where it came from."""
        if given is not None:
            value, source = given, "given"
        elif self.threshold is not None:
            value, source = self.threshold, f"chosen on validation: max {self.task.threshold_metric}"
        else:
            value, source = 0.5, "default; this run stored none"
        log.info("decision threshold %.4g (%s)", value, source)
        return value

    def call_density(self, given: float | None, threshold_given: bool) -> float | None:
        """Calls per Mbp for a track model's promoter calls, or None to call above the decision threshold: ``given``
        (--calls-per-mbp); else None when a --threshold was given; else the TSS density of the training genomes
        (TSSs 100 bp apart per Mbp) that the run kept (an ensemble: the mean of its members', when every one kept
        one); None for runs from before it was kept. A threshold chosen on the training genomes' validation did not
        transfer to new genomes (docs/benchmarks.md: no calls at all on one held-out genome, 848 per Mbp on
        another); a density does not depend on calibration."""
        if not self.task.has_track:
            if given is not None:
                raise InputError(None, "--calls-per-mbp is for track models (promoter calls on genomes)")
            return None
        if given is not None:
            value, source = given, "given"
        elif threshold_given:
            return None
        elif self.tss_per_mbp:
            value, source = self.tss_per_mbp, "the training genomes' TSSs, 100 bp apart"
        else:
            return None
        log.info("calls: the %.4g per Mbp most probable local maxima of each contig (%s; --threshold calls above a "
                 "probability instead)", value, source)
        return value

    def rc_average(self, given: bool | None) -> bool:
        """``given`` (--rc-average / --no-rc-average), else on for a sequence classifier that trained with reverse
        complements (rc_prob > 0: the small and base presets), off otherwise (a track model's genome prediction
        would take twice as long)."""
        if given is not None:
            return given
        on = default_views(self.config.task, self.config.train)[0]
        if on:
            log.info("both strands averaged: the run trained with reverse complements (--no-rc-average: forward only)")
        return on


def load_kernels() -> None:
    """Import the Triton kernels' modules and compute Triton's cache key (it hashes Triton's own files, a few tenths
    of a second of the first launch). ``load_run`` runs it on a background thread while the
    weights load; whatever it leaves undone the first launch does."""
    import importlib

    try:
        for name in ("genolin.ops.norm_conv_triton", "genolin.ops.fused_triton", "genolin.ops.linear_attn_triton"):
            importlib.import_module(name)
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception as exc:  # noqa: BLE001 (a head start only: never fails the run)
        log.debug("loading the kernels ahead: %s", exc)


def _member(run_dir, config: RunConfig, dev: torch.device) -> tuple[Encoder, Task, Path, dict[str, str]]:
    task = get_task(config.task, config.train, config.task_state)
    model = Encoder(config.train.model)
    weights = ckpt.weights_for_inference(run_dir)
    meta = ckpt.load_weights(weights, model)
    what = "the best validated weights" if weights.name == ckpt.BEST else "the last weights (never validated)"
    if weights.name != ckpt.BEST:
        log.warning("%s: no %s (the weights validation chose); using the last weights, never validated, and no "
                    "decision threshold chosen on validation", run_dir, ckpt.BEST)
    if weights.name == ckpt.BEST and meta.get("step") == "0":  # said plainly: the epochs trained are not in them
        what += ", those from before the first training step (training never beat their validation score)"
    log.info("model: %s, %s (step %s) on %s", weights, what, meta.get("step", "?"), dev)
    return model.to(dev).eval(), task, weights, meta


def inference_bf16(config: RunConfig, device: torch.device, weights: list[Path]) -> bool:
    """``load_run``'s default for ``bf16_weights``: track models on CUDA that trained under bf16 autocast, and on a
    CPU with bfloat16 matrix units (``cpu_bf16``) track models whose ``weights`` files all hold bfloat16 (the
    bundled ones): nothing of theirs is lost, and a genome runs about 1.4x faster (the CPU student on E. coli:
    AUPRC 0.14027 against 0.14032 in float32, docs/benchmarks.md). Weights stored in float32 stay float32 on a
    CPU, where outputs then match the training's own precision."""
    if not TASK_TYPES[config.task].has_track:
        return False
    if device.type == "cuda":
        return config.train.amp
    return device.type == "cpu" and cpu_bf16() and all(ckpt.stored_bf16(w) for w in weights)


def _set_precision(members: list, config: RunConfig, dev: torch.device, bf16_weights: bool | None,
                   log_it: bool) -> None:
    """The members cast to bfloat16 when ``bf16_weights`` (None: ``inference_bf16``'s choice), and the choice logged
    (``_log_precision``) when ``log_it``."""
    if bf16_weights is None:
        bf16_weights = inference_bf16(config, dev, [m[2] for m in members])
    if bf16_weights:
        for member in members:
            member[0].to_inference_bf16()
    if log_it:
        _log_precision(config, dev, bf16_weights)


def _log_precision(config: RunConfig, dev: torch.device, bf16: bool) -> None:
    """On a CPU, where it depends on the processor, the precision of a track model (or of any model cast to
    bfloat16)."""
    if dev.type == "cpu" and (bf16 or TASK_TYPES[config.task].has_track):
        log.info("precision: %s", "bfloat16 (--precision float32 for float32)" if bf16 else "float32")


def _check_window(config: RunConfig, window_bp: int | None) -> None:
    """An InputError for a --window-bp the run cannot read its genome in."""
    if window_bp is None:
        return
    cfg = config.train
    why = None
    if not TASK_TYPES[config.task].has_track:
        why = f"sets the genome windows of track models; this run is a {config.task} model"
    elif window_bp % cfg.stride or window_bp < cfg.window_bp:
        why = (f"{window_bp:,} bp: windows are a multiple of the stride ({cfg.stride}) and at least the training "
               f"window ({cfg.window_bp:,} bp)")
    elif cfg.model.mixer in LENGTH_LIMITED_MIXERS and window_bp // cfg.stride > cfg.model.max_len > 0:
        why = f"{window_bp:,} bp: the {cfg.model.mixer} mixer reads at most {cfg.model.max_len:,} tokens"
    if why:
        raise InputError("--window-bp", why)


def _check_ensemble(run_dirs: list, configs: list[RunConfig]) -> None:
    """An InputError naming the first run that cannot join the first one's ensemble, and why: the members must
    see the same batches and score the same classes (``Task.ensemble_shared``)."""
    first = configs[0]
    for run_dir, config in zip(run_dirs[1:], configs[1:], strict=True):
        why = None
        if config.task != first.task:
            why = f"a {config.task} model, {run_dirs[0]} a {first.task} model"
        elif config.task_state.get("classes") != first.task_state.get("classes"):
            why = f"classes {config.task_state.get('classes')}, {run_dirs[0]} {first.task_state.get('classes')}"
        else:
            kind = TASK_TYPES[first.task]
            for key in kind.ensemble_shared:
                if key not in kind.ensemble_grouped and getattr(config.train, key) != getattr(first.train, key):
                    why = f"{key} {getattr(config.train, key)}, {run_dirs[0]} {getattr(first.train, key)}"
                    break
        if why:
            raise InputError(run_dir, f"cannot join an ensemble with {run_dirs[0]}: {why}")


def stride_groups(run_dirs: list, configs: list[RunConfig]) -> list[list]:
    """An ensemble's run directories grouped by the settings its members may differ in (``Task.ensemble_grouped``:
    a track's k, stride and window), the group of the finest stride first; an InputError naming a run whose stride
    is not a multiple of the finest."""
    kind = TASK_TYPES[configs[0].task]
    keyed: dict[tuple, list] = {}
    for run_dir, config in zip(run_dirs, configs, strict=True):
        keyed.setdefault(tuple(getattr(config.train, k) for k in kind.ensemble_grouped), []).append((run_dir, config))
    groups = sorted(keyed.values(), key=lambda g: g[0][1].train.stride)
    finest = groups[0][0][1].train.stride
    for group in groups[1:]:
        run_dir, config = group[0]
        if config.train.stride % finest:
            raise InputError(run_dir, f"cannot join an ensemble with {groups[0][0][0]}: stride {config.train.stride} "
                                      f"is not a multiple of {finest} (members of several strides are averaged at "
                                      f"the finest)")
    return [[run_dir for run_dir, _ in group] for group in groups]


def _load_strides(groups: list[list], config: RunConfig, device: str, *, distributed: bool, window_offsets: int,
                  **options) -> Run:
    """The Run of an ensemble of several strides (``stride_groups``): each group loaded as an ensemble of its own,
    the finest one's predictor averaging the others' tracks into its own (``Predictor.others``), weighted by their
    members; the decision threshold and TSS density are the members' means. ``config``: the first member's (whose
    task and autocast choose the precision of all, ``inference_bf16``)."""
    if window_offsets > 1:
        raise InputError("--offset-average", "averages tilings of one stride's windows; this ensemble has members of "
                                             "several strides")
    if distributed and init_distributed(device).world > 1:
        raise InputError("--model", "an ensemble of several strides (a bundled model's GPU members too: genolin "
                                    "models) runs in one process, not under torchrun; name one member (e.g. "
                                    "bacteria-base) or run without torchrun")
    dev = pick_device(device)
    if options["bf16_weights"] is None:  # one choice for the members of every stride
        weights = [ckpt.weights_for_inference(d) for group in groups for d in group]
        options["bf16_weights"] = inference_bf16(config, dev, weights)
    _log_precision(config, dev, options["bf16_weights"])
    runs = [load_run(group, device, **options, log_precision=False) for group in groups]
    sizes = [len(group) for group in groups]
    first = runs[0]
    first.predictor.others = [(run.predictor, n) for run, n in zip(runs[1:], sizes[1:], strict=True)]

    def mean(values: list) -> float | None:
        return None if any(v is None for v in values) else float(np.average(values, weights=sizes))

    log.info("an ensemble of %d runs of strides %s: probabilities averaged at stride %d", sum(sizes),
             ", ".join(str(r.config.train.stride) for r in runs), first.config.train.stride)
    return dataclasses.replace(first, threshold=mean([r.threshold for r in runs]),
                               tss_per_mbp=mean([r.tss_per_mbp for r in runs]))


def load_run(run_dir: str | os.PathLike | list, device: str = "auto", *, batch_size: int | None = None,
             distributed: bool = False, compile: bool = False, shift_views: int | None = 0,
             bf16_weights: bool | None = None, window_bp: int | None = None, window_offsets: int = 1,
             log_precision: bool = True) -> Run:
    """The model of a run directory (best weights if training validated, else the last), in eval mode; a list of
    run directories: their ensemble (see the package docstring), whose decision threshold is the mean of the ones
    its members chose on validation (when all did).
    ``distributed``: under torchrun, join its process group and share genome windows out over the ranks.
    ``compile``: run the blocks through torch.compile (see ``Predictor``).
    ``shift_views``: a sequence classifier's probabilities also averaged over its inputs with 1..shift_views
    leading bases dropped (``Predictor._per_batch``); None: the training's own shift range (max_shift_bp) for a
    classifier trained with reverse complements (the small and base presets), else 0.
    ``bf16_weights``: the model cast to bfloat16 (``Encoder.to_inference_bf16``: the residual stream too); None:
    ``inference_bf16``'s choice, one for all members (explain passes False: its gradients keep float32 weights).
    ``log_precision``: log a CPU's choice (an ensemble of several strides logs it once, not per stride).
    ``window_bp``: track models read the genome in windows of this many bp (a multiple of the stride, at least the
    training window; margins stay an eighth of the training window, so longer windows read fewer bases twice:
    1.33x at the training window, 1.07x at four times it); None: the training window.
    ``window_offsets``: track models average this many passes over a genome, their windows tiled from as many
    offsets (one process; N times the work)."""
    run_dirs = list(run_dir) if isinstance(run_dir, list | tuple) else [run_dir]
    if not run_dirs:
        raise InputError(None, "no run directory given")
    run_dirs = [p for d in run_dirs for p in resolve_models(d, None if device == "auto" else device)]  # bundled
    configs = [ckpt.read_run_config(d) for d in run_dirs]
    _check_ensemble(run_dirs, configs)
    groups = stride_groups(run_dirs, configs)
    if len(groups) > 1:
        return _load_strides(groups, configs[0], device, batch_size=batch_size, distributed=distributed,
                             compile=compile, shift_views=shift_views, bf16_weights=bf16_weights,
                             window_bp=window_bp, window_offsets=window_offsets)
    config = configs[0]
    kind = TASK_TYPES[config.task]
    _check_window(config, window_bp)
    if shift_views is None:
        shift_views = default_views(kind, config.train)[1]
    elif shift_views and not kind.shift_averaging:
        raise InputError("--shift-average", "averages shifted inputs of sequence classifiers; this run is a "
                                            f"{config.task} model")
    if window_offsets > 1 and not kind.has_track:
        raise InputError("--offset-average", f"averages tilings of genome windows; this run is a {config.task} model")
    dist = init_distributed(device) if distributed else Dist()
    if window_offsets > 1 and dist.world > 1:
        raise InputError("--offset-average", "runs in one process, not under torchrun")
    dev = pick_device(device, dist.local_rank)
    mark("device picked")
    loading = None
    if dev.type == "cuda":  # the kernels' modules load while the weights do
        loading = threading.Thread(target=load_kernels, name="genolin-load-kernels", daemon=True)
        loading.start()
    members = [_member(d, c, dev) for d, c in zip(run_dirs, configs, strict=True)]
    mark("weights on the device")
    _set_precision(members, config, dev, bf16_weights, log_precision)
    model, task, weights, _ = members[0]
    if batch_size is None:
        batch_size = config.train.batch_size
        if kind.has_track:  # genome windows: a batch of about WINDOW_BATCH_TOKENS tokens
            window_tokens = (window_bp or config.train.window_bp) // config.train.stride
            tokens = WINDOW_BATCH_TOKENS[dev.type == "cuda"]
            batch_size = max(1 if window_bp else batch_size, tokens // window_tokens)
    predictor = Predictor(model, task, dev, batch_size=batch_size, max_tokens=config.train.max_tokens,
                          amp=config.train.amp, dist=dist, compile=compile, members=[m[:2] for m in members],
                          shift_views=shift_views, window_bp=window_bp, cuda_graphs=True, loading=loading,
                          window_offsets=window_offsets)
    thresholds = [float(m[3]["threshold"]) for m in members if "threshold" in m[3]]
    threshold = float(np.mean(thresholds)) if len(thresholds) == len(members) else None
    densities = [c.task_state.get("tss_per_mbp") for c in configs]
    density = float(np.mean(densities)) if all(d is not None for d in densities) else None
    if len(members) > 1:
        log.info("an ensemble of %d runs: probabilities averaged", len(members))
    if window_offsets > 1:
        log.info("track probabilities averaged over %d tilings of the genome's windows (--offset-average)",
                 window_offsets)
    if shift_views:
        log.info("probabilities averaged over each sequence with 0..%d leading bases dropped (the run trained with "
                 "shifts of up to %d; --shift-average 0: off)", shift_views, config.train.max_shift_bp)
    return Run(config, task, model, predictor, weights, threshold, density)
