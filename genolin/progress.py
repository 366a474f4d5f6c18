"""Progress bars (tqdm on stderr) that follow the CLI's verbosity: hidden with ``-q`` and when not a terminal."""

from __future__ import annotations

import logging
import sys


def progress_bar(*, total: int | None = None, unit: str = "it", desc: str = "", enabled: bool | None = None):
    """A tqdm bar; ``enabled=None`` shows it only on a terminal while INFO messages are shown."""
    from tqdm.auto import tqdm

    if enabled is None:
        console = [h for h in logging.getLogger("genolin").handlers if isinstance(h, logging.StreamHandler)
                   and not isinstance(h, logging.FileHandler)]
        enabled = sys.stderr.isatty() and all(h.level <= logging.INFO for h in console)
    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, disable=not enabled, leave=False,
                dynamic_ncols=True)
