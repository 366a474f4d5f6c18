"""Mixers: the token-mixing layer of each encoder block, one class per kind (``EncoderConfig.mixer``), each
owning its parameters, its forward pass, its streaming path and causal step where it has them, its config checks
and its properties (``base.py`` says what a kind declares). ``MIXER_CLASSES`` is the one table of kinds; the
tuples below derive from it.

- "softmax" (``softmax.py``): exact attention (quadratic; a baseline).
- "linear", "favor" (``linear.py``): linear attention with feature map elu / relu / exp, optionally after a
  learned per-head projection to ``feature_dim`` features; FAVOR+ with ``favor_features`` random features,
  redrawn while training (design document 002).
- "hybrid" (``hybrid.py``): windowed softmax plus global linear attention under a learned gate (design
  document 000).
- "gla", "deltanet", "gated_deltanet" (``scan.py``): bidirectional recurrent scans with decay gates and/or the
  delta rule (design document 001).
- "linformer", "fnet", "synthesizer" (``linformer.py``, ``fnet.py``, ``synthesizer.py``): the baselines of
  design document 003; linformer and synthesizer take at most ``max_len`` tokens.
Only linear, favor and hybrid have the streaming path; those and softmax have the causal form (the others run
whole windows: genome prediction works in training-length windows, so they predict genomes too).

A new kind: a module here with a ``Mixer`` subclass, and a line in ``MIXER_CLASSES``.
"""

from __future__ import annotations

from genolin.mixers.base import LENGTH_LIMITED_MAX_TOKENS, Mixer, listed
from genolin.mixers.fnet import FNetMixer
from genolin.mixers.hybrid import HybridMixer
from genolin.mixers.linear import FavorMixer, LinearMixer
from genolin.mixers.linformer import LinformerMixer
from genolin.mixers.scan import GLA_GATE_NORMALIZER, GLA_MIN_LOG_DECAY, DeltaNetMixer, GatedDeltaNetMixer, GLAMixer
from genolin.mixers.softmax import SoftmaxMixer
from genolin.mixers.synthesizer import SynthesizerMixer

# name -> kind, in the order the names are listed to users
MIXER_CLASSES: dict[str, type[Mixer]] = {cls.name: cls for cls in (
    SoftmaxMixer, LinearMixer, FavorMixer, HybridMixer, GLAMixer, DeltaNetMixer, GatedDeltaNetMixer, LinformerMixer,
    FNetMixer, SynthesizerMixer)}

MIXERS = tuple(MIXER_CLASSES)
STREAMING_MIXERS = tuple(n for n, c in MIXER_CLASSES.items() if c.streams)  # the chunked streaming path
CAUSAL_MIXERS = tuple(n for n, c in MIXER_CLASSES.items() if c.causal_capable)  # causal=True and the step API
SCAN_MIXERS = tuple(n for n, c in MIXER_CLASSES.items() if c.scan)
LENGTH_LIMITED_MIXERS = tuple(n for n, c in MIXER_CLASSES.items() if c.length_limited)  # parameters sized by max_len


def mixer_class(name: str) -> type[Mixer]:
    """The kind called ``name`` (ValueError naming the known ones otherwise)."""
    if name not in MIXERS:  # a tuple: an unhashable value (a YAML list) is refused the same way
        raise ValueError(f"mixer must be one of {MIXERS}, got {name!r}")
    return MIXER_CLASSES[name]


def build_mixer(cfg, layer: int) -> Mixer:
    """The mixer of block ``layer`` for the encoder's config ``cfg`` (its ``mixer`` names the kind)."""
    return mixer_class(cfg.mixer)(cfg, layer)


__all__ = ["CAUSAL_MIXERS", "GLA_GATE_NORMALIZER", "GLA_MIN_LOG_DECAY", "LENGTH_LIMITED_MAX_TOKENS",
           "LENGTH_LIMITED_MIXERS", "MIXERS", "MIXER_CLASSES", "SCAN_MIXERS", "STREAMING_MIXERS", "DeltaNetMixer",
           "FNetMixer", "FavorMixer", "GLAMixer", "GatedDeltaNetMixer", "HybridMixer", "LinearMixer",
           "LinformerMixer", "Mixer", "SoftmaxMixer", "SynthesizerMixer", "build_mixer", "listed", "mixer_class"]
