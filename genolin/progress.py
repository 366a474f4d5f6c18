"""Progress of long work on stderr, following the CLI's verbosity: a tqdm bar on a terminal; where stderr is not a
terminal (a log file, a workflow's job), a log line at each tenth of the work with the time left; nothing under
``-q``."""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("genolin")
QUIET_S = 5.0  # work done within this many seconds says nothing


class LoggedProgress:
    """tqdm's ``update``/``set_postfix``/context manager, as an INFO line at each tenth of ``total`` (elapsed and
    the time left at the pace so far) once QUIET_S seconds have passed; without a total, a line a minute."""

    def __init__(self, total: int | None, unit: str, desc: str):
        self.total, self.unit, self.desc = total, unit, desc
        self.n, self.t0, self.said, self.last = 0, time.monotonic(), 0, time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.total:
            tenth = min(10, int(10 * self.n / self.total))
            if tenth > self.said and now - self.t0 >= QUIET_S:
                self.said = tenth
                spent = now - self.t0
                left = spent * (self.total - self.n) / max(self.n, 1)
                log.info("%s: %d%% (%s of %s %s), %s, about %s left", self.desc, 10 * tenth, f"{self.n:,}",
                         f"{self.total:,}", self.unit, _span(spent), _span(left))
        elif now - self.last >= 60:
            self.last = now
            log.info("%s: %s %s, %s", self.desc, f"{self.n:,}", self.unit, _span(now - self.t0))

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def progress_bar(*, total: int | None = None, unit: str = "it", desc: str = "", enabled: bool | None = None):
    """A tqdm bar; ``enabled=None``: on a terminal while INFO messages are shown, else (INFO shown, stderr not a
    terminal) ``LoggedProgress`` lines; ``enabled=False``: nothing."""
    from tqdm.auto import tqdm

    if enabled is None:
        console = [h for h in logging.getLogger("genolin").handlers if isinstance(h, logging.StreamHandler)
                   and not isinstance(h, logging.FileHandler)]
        shown = bool(console) and all(h.level <= logging.INFO for h in console)
        if shown and not sys.stderr.isatty():
            return LoggedProgress(total, unit, desc)
        enabled = shown and sys.stderr.isatty()
    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, disable=not enabled, leave=False,
                dynamic_ncols=True)
