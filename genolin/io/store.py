"""Labelled sequences held as one byte per base: every sequence's ACGTN bytes end to end in one uint8 buffer with
their offsets, in memory or, for a set larger than a quarter of the host's free memory, in a file of a cache folder
that is memory-mapped (pages come and go with use: the set may exceed memory) and unlinked as soon as it is
opened, so it takes disk only while the process runs, and a killed process leaves nothing behind.

    builder = store_builder(path, estimated_bases)   # in memory, or a cache file when the set is large
    builder.append(b"ACGT...")                         # per sequence, as the reader parses it
    store = builder.finish()                           # BaseStore: store[i] -> bytes, len(store), store.lengths

Tokens are made per batch from these bytes (``genolin.tasks.sequence``): no per-base token array is kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from genolin import host
from genolin.errors import InputError
from genolin.host import gib

log = logging.getLogger(__name__)

MEMORY_SHARE = 0.25  # a set above this share of the host's free memory goes to a memory-mapped cache file


class BaseStore(Sequence):
    """Sequences as ACGTN bytes in one uint8 buffer (``buffer``: an array, or a read-only memory map) cut at
    ``offsets`` (n + 1,): sequence i is buffer[offsets[i]:offsets[i + 1]]."""

    def __init__(self, buffer: np.ndarray, offsets: np.ndarray, path: Path | None = None):
        self.buffer, self.offsets, self.path = buffer, offsets, path

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.buffer[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes) or len(other) != len(self):
            return NotImplemented if not isinstance(other, Sequence) else False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # mutable-looking, compared by content

    def __repr__(self) -> str:
        where = f", mapped from {self.path}" if self.path is not None else ""
        return f"BaseStore({len(self)} sequences, {int(self.offsets[-1]):,} bases{where})"

    @property
    def lengths(self) -> np.ndarray:
        """(n,) int64 bases of each sequence."""
        return np.diff(self.offsets)

    @property
    def resident_bytes(self) -> int:
        """The bytes this store keeps in memory: its buffer, unless memory-mapped, and its offsets."""
        return (0 if self.path is not None else self.buffer.nbytes) + self.offsets.nbytes


class StoreBuilder:
    """Appends sequences to a growing buffer (``file``: a cache file being written; None: memory)."""

    def __init__(self, file: Path | None = None):
        self.file = file
        self._memory = bytearray() if file is None else None
        self._fh = open(file, "w+b") if file is not None else None  # noqa: SIM115 - closed by finish/abandon
        if file is not None:  # unlinked at once: a killed process leaves no file (the open one lives on)
            file.unlink()
        self._offsets, self._at = [0], 0

    def append(self, seq: bytes) -> None:
        if self._fh is not None:
            self._fh.write(seq)
        else:
            self._memory += seq
        self._at += len(seq)
        self._offsets.append(self._at)

    def finish(self) -> BaseStore:
        offsets = np.array(self._offsets, dtype=np.int64)
        if self._fh is None:
            return BaseStore(np.frombuffer(self._memory, dtype=np.uint8), offsets)
        self._fh.flush()
        if self._at == 0:
            self._fh.close()
            return BaseStore(np.zeros(0, dtype=np.uint8), offsets)
        mapped = np.memmap(self._fh, dtype=np.uint8, mode="r")  # the mapping keeps the data after the close
        self._fh.close()
        return BaseStore(mapped, offsets, self.file)

    def abandon(self) -> None:
        """A failed read: the partial cache file (unlinked already) is let go."""
        if self._fh is not None:
            self._fh.close()


def cache_folder() -> Path:
    """$GENOLIN_CACHE, else $XDG_CACHE_HOME/genolin, else ~/.cache/genolin, + /sets."""
    base = os.environ.get("GENOLIN_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
        "genolin"
    return Path(base) / "sets"


def estimated_bases(path: str | os.PathLike) -> int:
    """The bases a labelled file may hold, at most: its size, or four times it for a gzip file (DNA text
    compresses about fourfold)."""
    from genolin.io.files import sniff_compression

    size = Path(path).stat().st_size
    return size * (4 if sniff_compression(path) in ("gzip", "bgzf") else 1)


def store_builder(path: str | os.PathLike, bases: int | None = None) -> StoreBuilder:
    """A builder for the set in ``path``: in memory when its bases (``estimated_bases`` unless given) are below
    MEMORY_SHARE of the host's free memory, else a file in ``cache_folder()``, memory-mapped when finished. A set
    that fits neither stops here, before it is read, naming the file and what it needs."""
    bases = estimated_bases(path) if bases is None else bases
    room = host.available_bytes()
    if bases <= MEMORY_SHARE * room:
        return StoreBuilder()
    folder = cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise InputError(path, f"about {gib(bases)} of sequence, over a quarter of the {gib(room)} of free memory, "
                               f"and no cache folder for it ({folder}: {exc.strerror or exc}); set GENOLIN_CACHE to "
                               "a writable folder") from None
    if bases > free:
        raise InputError(path, f"about {gib(bases)} of sequence: more than a quarter of the {gib(room)} of free "
                               f"memory and more than the {gib(free)} free in the cache folder {folder}; free disk "
                               "space there, set GENOLIN_CACHE to a larger disk, or train on a smaller set")
    key = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    fd, name = tempfile.mkstemp(prefix=f"{key}.", suffix=".bases", dir=folder)
    os.close(fd)
    log.info("%s: about %s of sequence, over a quarter of the %s of free memory: held in %s, memory-mapped",
             path, gib(bases), gib(room), name)
    return StoreBuilder(Path(name))


__all__ = ["BaseStore", "StoreBuilder", "cache_folder", "estimated_bases", "store_builder"]
