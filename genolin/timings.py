"""A command's stages as timestamps, for benchmarks/predict_startup.py: with GENOLIN_TIMINGS=1 in the environment,
``mark(stage)`` writes ``genolin timings: STAGE SECONDS`` to stderr, SECONDS the wall clock (``time.time()``), so a
parent that noted the clock when it started the process reads each stage's offset from the start. Otherwise a
no-op (one boolean test).

    mark("weights loaded")
"""

from __future__ import annotations

import os
import sys
import time

ENABLED = os.environ.get("GENOLIN_TIMINGS", "0") not in ("", "0")
PREFIX = "genolin timings: "


def mark(stage: str) -> None:
    """``stage`` reached now (stderr, with GENOLIN_TIMINGS=1)."""
    if ENABLED:
        print(f"{PREFIX}{stage} {time.time():.6f}", file=sys.stderr, flush=True)
