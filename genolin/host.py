"""The host's memory, read without torch: what the kernel says a new allocation may still take.

    available_bytes()   MemAvailable, or less under a cgroup limit; GENOLIN_MEMORY_GIB, where set, instead
    gib(n)              bytes in words ("1.5 GiB", "12 MiB")
"""

from __future__ import annotations

import math
import os

from genolin.errors import InputError

GIB = 2**30


def given_bytes() -> int | None:
    """GENOLIN_MEMORY_GIB in bytes (a budget set by hand: to plan for a smaller machine, and in tests), or None."""
    given = os.environ.get("GENOLIN_MEMORY_GIB")
    if not given:
        return None
    try:
        gib_given = float(given)
    except ValueError:
        gib_given = -1.0
    if not 0 < gib_given < 1e6:
        raise InputError("GENOLIN_MEMORY_GIB", f"expected a number of GiB above 0, got {given!r}")
    return int(gib_given * GIB)


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup (v2 or v1) may still take, where it sets a limit."""
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_path) as fh:
                limit = fh.read().strip()
            with open(usage_path) as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:
            return max(int(limit) - usage, 0)
    return None


def available_bytes() -> int:
    """The RAM the process may still take: GENOLIN_MEMORY_GIB where set, else the kernel's MemAvailable, or less
    under a cgroup limit (no reading: no limit)."""
    given = given_bytes()
    if given is not None:
        return given
    room = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    room = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if room is None:
        try:
            room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return 2**62  # no reading: no guard
    cgroup = _cgroup_room()
    return min(room, cgroup) if cgroup is not None else room


def gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB / 10 else f"{math.ceil(n / 2**20)} MiB"
